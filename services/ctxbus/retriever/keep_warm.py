"""The retriever's embedder kept warm while the stack is idle.

After minutes of silence the first embed of a new prompt was 6-10x slower than a warm one on a quiet VM (the
benchmark's own embed control showed the same, with no bus: docs/idle.md), and a retrieval is mostly that embed.
Every ``every_s`` the loop embeds a fixed text on the model itself (not through the query cache: the model runs) in
a worker thread, so the model's memory and code stay in use. Each costs one short embed (about 10 ms of CPU warm);
under load it is one embed more among many.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from ctxbus.ports import Embedder

log = structlog.get_logger("ctxbus.keep_warm")

#: what is embedded (any short text: the whole model runs for every text)
WARM_TEXT = "keep the embedding model warm while the stack is idle"


class KeepWarm:
    """Embeds ``WARM_TEXT`` every ``every_s`` until stopped (0: never)."""

    def __init__(self, embedder: Embedder, every_s: float) -> None:
        self._embedder, self.every_s = embedder, every_s
        #: embeds made so far
        self.warmed = 0

    def warm(self) -> None:
        self._embedder.embed_query(WARM_TEXT)
        self.warmed += 1

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: one embed in a worker thread every ``every_s`` (a failure is logged, never fatal)."""
        if self.every_s <= 0:
            return
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)
            if stop.is_set():
                return
            try:
                await asyncio.to_thread(self.warm)
            except Exception as exc:
                log.warning("keep_warm_failed", error=repr(exc))
