"""Settling and committing behind the fetch loop.

The consumer loop hands each batch's outputs to the producer as it handles them. Waiting for their
acknowledgements and then for the offset commit before fetching again put two broker round trips into every
cycle of the loop: at a few requests per fetch that, not the handling, set how many requests a second a
service could answer. Here the loop gives the batch (what it sent, the offsets after it) to a committer and
fetches the next one at once; the committer waits for the outputs and commits in order, merging the batches
that queued up meanwhile into one commit.

The guarantee is unchanged: an offset is committed only after every output (or dead letter) of the records
before it is acknowledged. A crash loses at most uncommitted offsets, whose records are read again and
recognised as answered (the answered ledger). The queue is bounded, so a slow broker slows the loop down
instead of piling up work, and a commit that fails stops the loop the next time it hands over a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from ctxbus.adapters.kafka.inflight import Sent

log = structlog.get_logger("ctxbus.runner")

#: batches waiting for the committer; it may hold as many more it took together, so the loop is at most twice
#: this many batches ahead of its commits
DEPTH = 4


@dataclass(frozen=True, slots=True)
class SettledBatch:
    """One fetched batch: what its records sent (in handling order) and each partition's next offset."""

    sent: Sequence[Sent]
    offsets: dict[TopicPartition, int]


class Committer:
    """Settles and commits the batches handed to it, in order, in a task of its own."""

    def __init__(
        self,
        name: str,
        settle: Callable[[Sent], Awaitable[None]],
        commit: Callable[[dict[TopicPartition, OffsetAndMetadata]], Awaitable[object]],
        *,
        depth: int = DEPTH,
    ) -> None:
        self._name = name
        self._settle = settle
        self._commit = commit
        self._queue: asyncio.Queue[SettledBatch] = asyncio.Queue(maxsize=max(1, depth))
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def submit(self, batch: SettledBatch) -> None:
        """Hand over a batch (waiting while ``depth`` batches wait for the committer); raises the failure of an
        earlier commit."""
        self._check()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"commit:{self._name}")
        await self._queue.put(batch)

    async def drain(self) -> None:
        """Wait until every batch handed over is committed (before a rebalance takes partitions away, before the
        consumer stops); raises the failure of a commit."""
        if self._task is not None:
            await self._queue.join()
        self._check()

    async def close(self) -> None:
        """Drain, then end the task (a failure is raised after the task ended)."""
        try:
            await self.drain()
        finally:
            task, self._task = self._task, None
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def abandon(self) -> None:
        """End the task without committing what waits (the broker died: nothing can be committed on it, and a
        commit retries a dead coordinator for ever); those records are read again."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            batches = [await self._queue.get()]
            while not self._queue.empty():  # whatever queued up meanwhile: one commit for all
                batches.append(self._queue.get_nowait())
            try:
                if self._failure is None:
                    await self._settle_and_commit(batches)
            except Exception as exc:  # the loop raises it at its next hand-over
                log.error("commit_failed", service=self._name, error=repr(exc))
                self._failure = exc
            finally:
                for _ in batches:
                    self._queue.task_done()

    async def _settle_and_commit(self, batches: list[SettledBatch]) -> None:
        offsets: dict[TopicPartition, int] = {}
        for batch in batches:
            for sent in batch.sent:
                await self._settle(sent)
            offsets.update(batch.offsets)
        if offsets:
            await self._commit({tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()})
