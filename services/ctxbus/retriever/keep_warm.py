"""The retriever's embedder kept warm while the stack is idle.

After minutes of silence the first embed of a new prompt was 6-10x slower than a warm one on a quiet VM (the
benchmark's own embed control showed the same, with no bus: docs/idle.md), and a retrieval is mostly that embed.
When the model has not run for ``every_s`` (neither for a query nor for this loop), the loop embeds a fixed text on
the model itself (not through the query cache: the model runs) in a worker thread, so the model's memory and code
stay in use. Each costs one short embed (about 10 ms of CPU warm). Under load the queries keep the model warm and the
loop embeds nothing, so no fixed-text embed competes with a request's (a model that does not say when it last ran,
:class:`RunClock`, is embedded every ``every_s`` whatever the load).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import structlog

from ctxbus.ports import Embedder

log = structlog.get_logger("ctxbus.keep_warm")

#: what is embedded (any short text: the whole model runs for every text)
WARM_TEXT = "keep the embedding model warm while the stack is idle"
#: the loop's shortest wait, so a tiny period does not spin
MIN_WAIT_S = 0.05


@runtime_checkable
class RunClock(Protocol):
    """A model that records when it last ran (``time.monotonic()`` seconds; None: never)."""

    @property
    def last_run(self) -> float | None: ...


class KeepWarm:
    """Embeds ``WARM_TEXT`` whenever the model has not run for ``every_s`` (0: never), until stopped."""

    def __init__(self, embedder: Embedder, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._embedder, self.every_s, self._clock = embedder, every_s, clock
        #: when this loop last embedded (or tried to), or started
        self._last = clock()
        #: embeds made so far
        self.warmed = 0

    def _last_use(self) -> float:
        ran = self._embedder.last_run if isinstance(self._embedder, RunClock) else None
        return self._last if ran is None else max(self._last, ran)

    def due(self) -> float:
        """Seconds until the model will have been unused for ``every_s`` (0: now)."""
        return max(0.0, self._last_use() + self.every_s - self._clock())

    def warm(self) -> None:
        """One embed of the fixed text (exceptions are the caller's)."""
        self._last = self._clock()
        self._embedder.embed_query(WARM_TEXT)
        self.warmed += 1

    def tick(self) -> bool:
        """Embed when the model was unused for ``every_s``; whether it did (a failure is logged, never fatal, and
        the next try is ``every_s`` later)."""
        if self.due() > 0:
            return False
        try:
            self.warm()
        except Exception as exc:
            log.warning("keep_warm_failed", error=repr(exc))
            return False
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: a tick in a worker thread whenever one is due."""
        if self.every_s <= 0:
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(MIN_WAIT_S, self.due()))
            if stop.is_set():
                return
            if self.due() == 0:
                await asyncio.to_thread(self.tick)
