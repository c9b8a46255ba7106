"""A replay run: plan the ranges, read and decode them (in worker processes when it pays), join, report.

Decoding is the costly part (a completed event carries every ranked item with its score breakdown),
and fetching is not free either, so a large replay splits every partition's range into contiguous
slices, one per worker process; each worker reads its slices with its own consumer (no group, no
commits, like the planner's) and decodes them, and only the compact facts come back to be joined
here. Small replays read and decode in this process: starting workers would cost more than it saves.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.lifeline import lifeline
from ctxbus.contract.envelope import EventType
from ctxbus.contract.topics import Topics
from ctxbus.replay.decode import Decoder
from ctxbus.replay.facts import DecodeStats, Fact
from ctxbus.replay.join import Joiner, JoinResult
from ctxbus.replay.options import Selection
from ctxbus.replay.read import PartitionRange, ReadCounts, ReadPlan, TopicReader, split_ranges
from ctxbus.replay.report import build_report
from ctxbus.replay.report_model import Report, Source

#: Below this many records a replay reads and decodes in process (workers cost a few tenths of a second).
MIN_RECORDS_FOR_WORKERS = 20_000
#: Default worker processes for a large replay: one per core, at least two (measured on 2 cores: in
#: process 15,500 events/s, 2 workers 22,900, 3 or 4 workers about 21,000), at most this many.
MAX_DEFAULT_WORKERS = 4

Progress = Callable[[int, int], None]

log = structlog.get_logger("ctxbus.replay")


def topic_types(topics: Topics) -> dict[str, str | None]:
    """Which event type belongs on each topic (the dead-letter topic holds anything)."""
    return {
        topics.retrieval_requested: EventType.RETRIEVAL_REQUESTED,
        topics.retrieval_completed: EventType.RETRIEVAL_COMPLETED,
        topics.context_injected: EventType.CONTEXT_INJECTED,
        topics.outcome_recorded: EventType.OUTCOME_RECORDED,
        topics.attempt_recorded: EventType.ATTEMPT_RECORDED,
        topics.memory_upserted: EventType.MEMORY_UPSERTED,
        topics.memory_stored: EventType.MEMORY_STORED,
        topics.memory_curated: EventType.MEMORY_CURATED,
        topics.dead_letter: None,
    }


def default_workers(records: int, cores: int | None = None) -> int:
    """Worker processes for a replay of ``records``: none for small ones, else one per core (at least two)."""
    if records < MIN_RECORDS_FOR_WORKERS:
        return 0
    count = cores if cores is not None else os.cpu_count() or 1
    return max(2, min(MAX_DEFAULT_WORKERS, count))


@dataclass
class ReplayRun:
    plan: ReadPlan
    join: JoinResult
    stats: DecodeStats
    counts: ReadCounts
    source: Source
    #: seconds per phase: plan, read (fetch + decode), join
    timings: dict[str, float] = field(default_factory=dict)

    def report(self, top: int = 10) -> Report:
        with no_gc_pauses():
            return build_report(self.join, self.stats, self.source, top=top)


@dataclass
class _Part:
    facts: list[Fact]
    stats: DecodeStats
    counts: ReadCounts


async def _read_part(
    config: KafkaClientConfig,
    topics: Topics,
    ranges: Sequence[PartitionRange],
    selection: Selection,
    progress: Progress | None = None,
    planned: int = 0,
) -> _Part:
    decoder = Decoder(topic_types(topics), topics.dead_letter)
    facts: list[Fact] = []
    stats = DecodeStats()
    async with TopicReader(config, dead_letter_topic=topics.dead_letter) as reader:
        async for batch in reader.batches(ReadPlan(tuple(ranges)), selection):
            found, batch_stats = decoder.decode(batch)
            facts.extend(found)
            stats += batch_stats
            if progress is not None:
                progress(stats.records, planned)
    return _Part(facts, stats, reader.counts)


@contextlib.contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Without the cyclic collector for a while: a replay allocates millions of small acyclic objects
    (decoded records, facts), and the collector's passes over them cost more than the decoding itself
    (the facts' join ran 2.4 times faster without them). Restored afterwards, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _worker(config: KafkaClientConfig, prefix: str, ranges: Sequence[PartitionRange], selection: Selection) -> _Part:
    """A worker process's share: its slices of the ranges, read and decoded."""
    with no_gc_pauses():
        return asyncio.run(_read_part(config, Topics(prefix), ranges, selection))


def _context() -> multiprocessing.context.BaseContext:
    """fork where there is one (workers start in milliseconds and share the loaded modules), else spawn."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


async def replay(
    config: KafkaClientConfig,
    topics: Topics,
    names: Sequence[str],
    selection: Selection,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> ReplayRun:
    """Read ``names`` (full topic names of ``topics``) within ``selection`` and join what was read.

    ``workers``: reading and decoding processes (0: this process; None: ``default_workers`` for the
    planned size). ``progress(records_done, records_planned)`` is called as batches are decoded
    (in this process only).
    """
    with no_gc_pauses():
        started = time.perf_counter()
        timings: dict[str, float] = {}
        async with TopicReader(config, dead_letter_topic=topics.dead_letter) as planner:
            plan = await planner.plan(names, selection)
        timings["plan"] = time.perf_counter() - started
        count = default_workers(plan.records) if workers is None else max(0, workers)
        if plan.records == 0:
            count = 0  # nothing in range: no reader needed
            part = _Part([], DecodeStats(), ReadCounts())
            joiner = Joiner()
        elif count == 0:
            part, joiner = await _in_process(config, topics, plan, selection, progress)
        else:
            try:
                part, joiner = await _in_workers(config, topics, plan, selection, count, progress)
            except BrokenProcessPool:
                log.warning("replay_workers_failed", workers=count, fallback="in process")
                count = 0
                part, joiner = await _in_process(config, topics, plan, selection, progress)
        stats, counts = part.stats, part.counts
        timings["read"] = time.perf_counter() - started - timings["plan"]
        join_started = time.perf_counter()
        join = joiner.finish()
        timings["join"] = time.perf_counter() - join_started
        source = Source(
            topics=tuple(names),
            since=since,
            until=until,
            partitions=tuple((r.topic, r.partition, r.start, r.end) for r in plan.ranges),
            out_of_window=counts.out_of_window,
            missing_topics=plan.missing_topics,
            incomplete=tuple(counts.incomplete),
            read_seconds=time.perf_counter() - started,
            workers=count,
        )
        return ReplayRun(plan, join, stats, counts, source, timings)


async def _in_process(
    config: KafkaClientConfig, topics: Topics, plan: ReadPlan, selection: Selection, progress: Progress | None
) -> tuple[_Part, Joiner]:
    joiner = Joiner()
    part = await _read_part(config, topics, plan.ranges, selection, progress, plan.records)
    joiner.add(part.facts)
    part.facts = []
    return part, joiner


async def _in_workers(
    config: KafkaClientConfig,
    topics: Topics,
    plan: ReadPlan,
    selection: Selection,
    count: int,
    progress: Progress | None,
) -> tuple[_Part, Joiner]:
    """Every partition's range split between ``count`` worker processes; their facts joined here."""
    joiner = Joiner()
    total = _Part([], DecodeStats(), ReadCounts())
    loop = asyncio.get_running_loop()
    # workers die with this process, even a SIGKILLed one (ctxbus.adapters.lifeline)
    with ProcessPoolExecutor(max_workers=count, mp_context=_context(), initializer=lifeline()) as pool:
        parts = [
            loop.run_in_executor(pool, _worker, config, topics.prefix, share, selection)
            for share in split_ranges(plan.ranges, count)
            if share
        ]
        for finished in asyncio.as_completed(parts):
            part = await finished
            joiner.add(part.facts)
            total.stats += part.stats
            total.counts.out_of_window += part.counts.out_of_window
            total.counts.incomplete.extend(part.counts.incomplete)
            if progress is not None:
                progress(total.stats.records, plan.records)
    return total, joiner
