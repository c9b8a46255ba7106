"""The request path woken while the stack is idle, so the first hook after a long silence finds it warm.

On these VMs anything run after minutes of silence runs two to five times slower than warm (docs/idle.md): the
first hook after 300 s took 2.3-2.7x the warm p50 on the embedded stack, every hop slower. With the embedded broker's
doorbell, the gateway rings the request path awake when a hook arrives; every ``every_s`` when no hook has arrived for
that long, this sends the path a warm ring (``ctxbus.adapters.kafka.quiet.warm_ring``): the retriever, the injector
and the gateway's reply reader resume fetching for a moment (a few fetches, not their awake second: a hook's ring
keeps them fetching for that), which keeps their fetch path, the broker's and the processes in use, and sleep again.
Nothing is published. Off (``every_s`` 0) on a real cluster, where there is no doorbell.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("ctxbus.path_tick")


class PathTick:
    """Calls ``ring`` when a hook arrives (:meth:`arrived`), and ``warm`` (``ring`` when not given) after every
    ``every_s`` of silence (0: never)."""

    def __init__(
        self,
        ring: Callable[[], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
        warm: Callable[[], None] | None = None,
    ) -> None:
        self._ring, self.every_s, self._clock = ring, every_s, clock
        self._warm = warm if warm is not None else ring
        self._last = clock()
        #: rings so far
        self.rung = 0

    def arrived(self) -> None:
        """A hook that asks for context arrived: the path is rung awake now (exceptions are the caller's), and the
        next tick is ``every_s`` from now."""
        self._last = self._clock()
        self._ring()

    def due(self) -> float:
        """Seconds until the next ring is due (0: now)."""
        return max(0.0, self._last + self.every_s - self._clock())

    def tick(self) -> bool:
        """The warm ring when a whole ``every_s`` passed without a hook or a ring; whether it rang."""
        if self.due() > 0:
            return False
        self._last = self._clock()
        try:
            self._warm()
        except Exception as exc:  # never fatal: the next hook rings for itself
            log.warning("path_tick_failed", error=repr(exc))
            return False
        self.rung += 1
        return True

    async def run(self, stop: asyncio.Event) -> None:
        if self.every_s <= 0:
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.05, self.due()))
            if not stop.is_set():
                self.tick()
