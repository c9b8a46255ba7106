"""How far a consumer loop has got: per partition, the offset after the last record it handled.

"Handled" means the handler returned (or the record was dead-lettered, or skipped as already answered): for a
loop that writes a state (the injector's attempts), everything before that offset is in the state. At
assignment a partition starts at the consumer's position there (the group's committed offset: what an earlier
life of the same state handled). A waiter (``wait_past``) is woken whenever the loop moves on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping


class Progress:
    def __init__(self) -> None:
        self._next: dict[int, int] = {}
        self._moved = asyncio.Condition()

    def at(self, partition: int) -> int:
        """The offset after the last record handled on ``partition`` (0 before any)."""
        return self._next.get(partition, 0)

    async def advance(self, partition: int, next_offset: int) -> None:
        """The loop handled ``partition`` up to ``next_offset`` (never moves back)."""
        if next_offset <= self._next.get(partition, 0):
            return
        self._next[partition] = next_offset
        async with self._moved:
            self._moved.notify_all()

    def passed(self, ends: Mapping[int, int]) -> bool:
        """Whether every partition is handled up to its offset in ``ends``."""
        return all(self.at(p) >= end for p, end in ends.items())

    async def wait_past(self, ends: Mapping[int, int], timeout_s: float) -> bool:
        """Wait until :meth:`passed` (True) or ``timeout_s`` went by (False)."""
        if self.passed(ends):
            return True
        try:
            async with asyncio.timeout(max(0.0, timeout_s)), self._moved:
                await self._moved.wait_for(lambda: self.passed(ends))
        except TimeoutError:
            return self.passed(ends)
        return True
