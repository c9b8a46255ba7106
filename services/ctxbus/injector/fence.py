"""Read your writes for pre-context: a retry's pre-context sees every attempt recorded before the request.

Attempts reach the injector through its own loop on the attempts topic, which runs beside the loop that
assembles (and, with several injectors, in every member: each reads the whole topic). A request for a retry,
fallback or helper is sent after its task's attempt was recorded (the broker acknowledged it); so, before its
pre-context is built, the fence asks the broker where the attempts topic ends now and waits until this member's
attempts loop has handled everything before those ends. The wait is bounded by the request's deadline and by
``CTXBUS_PRECONTEXT_FENCE_WAIT_S``; past it the pre-context is built from what is there (and the log says so).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.core.deadlines import remaining_s

log = structlog.get_logger("ctxbus.injector")


class Ends(Protocol):
    """Where a topic ends now, per partition (``ctxbus.adapters.kafka.topic_ends.TopicEnds``)."""

    async def ends(self) -> dict[int, int]: ...


class AttemptsFence:
    def __init__(self, ends: Ends, progress: Progress, *, wait_s: float, clock: Callable[[], datetime]) -> None:
        self._ends = ends
        self._progress = progress
        self._wait_s = wait_s
        self._clock = clock

    def _budget(self, deadline: datetime | None) -> float:
        left = remaining_s(deadline, self._clock())
        return self._wait_s if left is None else min(self._wait_s, left)

    async def __call__(self, deadline: datetime | None) -> bool:
        """Whether the attempts loop has passed every attempt recorded so far (False: not within the wait)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self._budget(deadline)
        if until <= loop.time():
            return False
        try:
            async with asyncio.timeout_at(until):
                ends = await self._ends.ends()
        except (KafkaError, OSError, TimeoutError, MissingTopic) as exc:
            log.warning("precontext_fence_failed", error=repr(exc))
            return False
        passed = await self._progress.wait_past(ends, until - loop.time())
        if not passed:
            behind = {p: end - self._progress.at(p) for p, end in ends.items() if self._progress.at(p) < end}
            log.warning("precontext_fence_timeout", behind=behind)
        return passed
