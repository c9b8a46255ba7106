"""The replay's Kafka adapter: reads ranges of ctxbus topics as raw records, and nothing else.

The consumer never joins a consumer group and never commits: it has no group id, assigns the
partitions itself and seeks. So the services' groups, their offsets and their assignments are
untouched, however often an analyst replays. It reads up to the end offsets captured when the
read was planned, then stops (events published meanwhile are left for the next replay).

Time windows apply to the record timestamps. ``offsets_for_times`` narrows where to start and stop
(with some slack, because timestamps are not strictly ordered within a partition), and every record
is then checked against the window, so the answer is exact either way.

The embedded broker (Tansu) reports the end of a partition (``ListOffsets`` latest) as the base
offset of its last record batch plus one, which is short when that batch holds several records; its
fetch responses carry the true high watermark. On the embedded broker the plan therefore fetches the
last reported record once and takes the high watermark as the end. Tansu's ``offsets_for_times``
indexes append times and answers "none" as offset 0 with timestamp -1, which is read as none here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.replay.facts import RawRecord
from ctxbus.replay.options import Selection

#: Large fetches: a replay reads whole partitions, not single events.
FETCH_MAX_BYTES = 64 * 1024 * 1024
PARTITION_FETCH_MAX_BYTES = 16 * 1024 * 1024
#: How long getmany waits for records before the loop checks positions again.
POLL_TIMEOUT_MS = 200
#: A partition that yields nothing for this long while short of its end is given up (and reported).
IDLE_LIMIT_S = 5.0
#: How long the embedded broker's true end offsets are probed for.
END_PROBE_TIMEOUT_S = 5.0
#: Slack around a time window when asking the broker for offsets (timestamps are not strictly ordered).
WINDOW_SLACK_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class PartitionRange:
    topic: str
    partition: int
    #: first offset to read
    start: int
    #: read offsets below this one (the end captured when planning, or the --to-offset bound)
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class ReadPlan:
    ranges: tuple[PartitionRange, ...]
    #: topics asked for that the cluster does not have (read as empty)
    missing_topics: tuple[str, ...] = ()

    @property
    def records(self) -> int:
        return sum(r.size for r in self.ranges)


@dataclass(slots=True)
class ReadCounts:
    """What the reading saw besides the records it handed over."""

    out_of_window: int = 0
    #: partitions given up before their end: (topic, partition, position, end)
    incomplete: list[tuple[str, int, int, int]] = field(default_factory=list)


def _found(answer: object) -> int | None:
    """An ``offsets_for_times`` answer as an offset, or None (Tansu answers none as timestamp -1)."""
    if answer is None:
        return None
    offset, timestamp = getattr(answer, "offset", None), getattr(answer, "timestamp", None)
    if not isinstance(offset, int) or offset < 0 or (isinstance(timestamp, int) and timestamp < 0):
        return None
    return offset


def split_ranges(ranges: Sequence[PartitionRange], parts: int) -> list[tuple[PartitionRange, ...]]:
    """``parts`` shares of the ranges: every range cut into ``parts`` contiguous slices of (nearly)
    equal size, slice i going to share i, so each share reads about as much of every partition."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    shares: list[list[PartitionRange]] = [[] for _ in range(parts)]
    for r in ranges:
        for i in range(parts):
            start = r.start + r.size * i // parts
            end = r.start + r.size * (i + 1) // parts
            if end > start:
                shares[i].append(PartitionRange(r.topic, r.partition, start, end))
    return [tuple(share) for share in shares]


class TopicReader:
    """``async with TopicReader(config) as reader``: ``plan`` the ranges, then iterate ``batches``."""

    def __init__(
        self,
        config: KafkaClientConfig,
        *,
        client_id: str = "replay",
        dead_letter_topic: str | None = None,
        headers_for: Sequence[str] = (),
    ) -> None:
        """``headers_for``: topics whose records keep their headers (the dead-letter topic always does)."""
        self._config = config
        self._with_headers = {*headers_for, *([dead_letter_topic] if dead_letter_topic else [])}
        self._consumer = AIOKafkaConsumer(
            **{
                **config.consumer(client_id, None),  # no group id: no group, no commits, ever
                "fetch_max_bytes": FETCH_MAX_BYTES,
                "max_partition_fetch_bytes": PARTITION_FETCH_MAX_BYTES,
            }
        )
        self.counts = ReadCounts()

    async def __aenter__(self) -> TopicReader:
        await self._consumer.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._consumer.stop()
        except asyncio.CancelledError:
            # aiokafka 0.14: stopping a group-less consumer that was never assigned re-raises the
            # cancellation of one of its own internal tasks; only a cancellation of ours goes on
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise

    async def _true_ends(
        self, tps: list[TopicPartition], reported: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The embedded broker's real end offsets: fetch each partition's last reported record once
        and read the high watermark from the fetch response."""
        probe = [tp for tp in tps if reported[tp] > 0]
        if not probe:
            return reported
        consumer = self._consumer
        consumer.assign(probe)
        for tp in probe:
            consumer.seek(tp, reported[tp] - 1)
        waiting = set(probe)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + END_PROBE_TIMEOUT_S
        while waiting and loop.time() < deadline:
            batch = await consumer.getmany(*waiting, timeout_ms=POLL_TIMEOUT_MS)
            waiting -= {tp for tp, records in batch.items() if records}
        ends = dict(reported)
        for tp in probe:
            high = consumer.highwater(tp)
            if isinstance(high, int) and high > ends[tp]:
                ends[tp] = high
        consumer.assign([])
        return ends

    async def plan(self, topics: Sequence[str], selection: Selection) -> ReadPlan:
        consumer = self._consumer
        existing = await consumer.topics()
        missing = tuple(t for t in topics if t not in existing)
        tps = [
            TopicPartition(t, p)
            for t in topics
            if t in existing
            for p in sorted(consumer.partitions_for_topic(t) or ())
        ]
        if not tps:
            return ReadPlan((), missing)
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        if self._config.embedded:
            end = await self._true_ends(tps, end)
        since: dict[TopicPartition, int | None] = {}
        until: dict[TopicPartition, int | None] = {}
        if selection.since_ms is not None:
            found = await consumer.offsets_for_times({tp: max(0, selection.since_ms - WINDOW_SLACK_MS) for tp in tps})
            since = {tp: _found(found.get(tp)) for tp in tps}
        if selection.until_ms is not None:
            found = await consumer.offsets_for_times({tp: selection.until_ms + WINDOW_SLACK_MS for tp in tps})
            until = {tp: _found(found.get(tp)) for tp in tps}
        ranges = []
        for tp in tps:
            first, last = begin[tp], end[tp]
            start, stop = first, last
            if selection.since_ms is not None:
                at = since[tp]
                start = last if at is None else max(start, at)  # nothing at or after --since: read nothing
            if selection.until_ms is not None and until[tp] is not None:
                stop = min(stop, until[tp] or 0)
            if selection.from_offsets is not None:
                bound = selection.from_offsets.for_partition(tp.topic, tp.partition)
                if bound is not None:
                    start = max(start, bound)
            if selection.to_offsets is not None:
                bound = selection.to_offsets.for_partition(tp.topic, tp.partition)
                if bound is not None:
                    stop = min(stop, bound)
            start = min(max(start, first), last)
            ranges.append(PartitionRange(tp.topic, tp.partition, start, max(start, min(stop, last))))
        return ReadPlan(tuple(ranges), missing)

    async def batches(self, plan: ReadPlan, selection: Selection) -> AsyncIterator[list[RawRecord]]:
        """The plan's records, in fetch-sized batches (offset order within a partition)."""
        consumer = self._consumer
        todo = {TopicPartition(r.topic, r.partition): r.end for r in plan.ranges if r.size}
        consumer.assign(list(todo))
        for r in plan.ranges:
            if r.size:
                consumer.seek(TopicPartition(r.topic, r.partition), r.start)
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        windowed = selection.windowed
        in_window = selection.in_window
        with_headers = self._with_headers
        while todo:
            batch = await consumer.getmany(*todo, timeout_ms=POLL_TIMEOUT_MS)
            out: list[RawRecord] = []
            for tp, records in batch.items():
                stop = todo.get(tp)
                if stop is None or not records:
                    continue
                topic, partition = tp.topic, tp.partition
                headers = topic in with_headers
                for rec in records:
                    if rec.offset >= stop:
                        break
                    if windowed and not in_window(rec.timestamp):
                        self.counts.out_of_window += 1
                        continue
                    out.append(
                        RawRecord(
                            topic,
                            partition,
                            rec.offset,
                            rec.timestamp,
                            rec.value,
                            tuple(rec.headers) if headers and rec.headers else (),
                        )
                    )
                if records[-1].offset + 1 >= stop:
                    del todo[tp]
                    consumer.pause(tp)
            if batch:
                idle_since = loop.time()
            if out:
                yield out
            elif todo and not batch and loop.time() - idle_since > POLL_TIMEOUT_MS / 1000.0:
                # nothing came: a partition may end in offsets without records (compaction, markers)
                for tp in list(todo):
                    position = await consumer.position(tp)
                    if position >= todo[tp]:
                        del todo[tp]
                if loop.time() - idle_since > IDLE_LIMIT_S:
                    for tp, stop in todo.items():
                        self.counts.incomplete.append((tp.topic, tp.partition, await consumer.position(tp), stop))
                    break
