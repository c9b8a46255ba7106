"""The archiver: a group-less consumer that appends everything the ctxbus topics carry to the archive.

It assigns itself every partition of the prefix's topics (no consumer group: it never shares or moves
anyone's partitions), resumes after the last archived offset, writes each record to its partition's
current file, and every ``flush_interval_s`` flushes the files (so a SIGKILL loses at most that much)
and snapshots the committed positions of the prefix's consumer groups into ``state.json``. Retention
runs every minute. Asked to stop, it first reads up to the end of every partition, so a SIGTERM loses
nothing the services wrote before they stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.archive_progress import Progress, start_life, write_progress
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.quiet import Quiet
from ctxbus.archive.files import PartitionWriter, read_file, scan
from ctxbus.archive.layout import expired
from ctxbus.archive.state import ArchiveState, tp_key
from ctxbus.contract.topics import Topics

log = structlog.get_logger("ctxbus.archive")

FETCH_TIMEOUT_MS = 200
MAX_RECORDS = 2_000
#: how often new topics and partitions are looked for, and retention runs
HOUSEKEEPING_S = 60.0
REDISCOVER_S = 5.0
#: how long a stopping archiver keeps reading to reach the end of every partition
DRAIN_TIMEOUT_S = 5.0
#: the longest a snapshot reads on to the partitions' ends before it keeps the positions (else it keeps the last)
CATCH_UP_S = 2.0
#: the longest a snapshot of the groups' positions may take: aiokafka asks a dead coordinator for ever
SNAPSHOT_TIMEOUT_S = 10.0
#: the longest closing a group reader may take (it leaves its group, maybe on a dead broker)
CLOSE_TIMEOUT_S = 5.0


class _Timers:
    """When the archiver's periodic work is next due (monotonic seconds), and what it appended unflushed."""

    def __init__(self, now: float, flush_s: float, offsets_s: float) -> None:
        self.flush, self.offsets = now + flush_s, now + offsets_s
        self.rediscover, self.housekeeping, self.unflushed = now + REDISCOVER_S, now, 0


def last_archived(root: Path) -> dict[tuple[str, int], int]:
    """The last archived offset of every partition (read from each partition's newest file)."""
    newest: dict[tuple[str, int], Path] = {}
    for f in scan(root):
        newest[f.key] = f.path  # scan is in offset order: the last one wins
    last: dict[tuple[str, int], int] = {}
    for key, path in newest.items():
        for record in read_file(path):
            last[key] = max(last.get(key, -1), int(record["offset"]))
    return last


class Archiver:
    def __init__(
        self,
        config: KafkaClientConfig,
        topics: Topics,
        root: Path,
        *,
        flush_interval_s: float = 1.0,
        offsets_interval_s: float = 5.0,
        retention_days: float = 30.0,
        retention_bytes: int = 1 << 30,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._config, self._topics, self._root = config, topics, root
        self._flush_s, self._offsets_s = flush_interval_s, offsets_interval_s
        self._retention_days, self._retention_bytes = retention_days, retention_bytes
        self._clock = clock
        self._state = ArchiveState.load(root)
        self._writers: dict[TopicPartition, PartitionWriter] = {}
        self._assigned: set[TopicPartition] = set()
        self._next: dict[TopicPartition, int] = {}  # next archive offset expected per partition
        self._group_readers: dict[str, AIOKafkaConsumer] = {}
        #: the next archive offset of each partition the archive already holds (read at start)
        self._resume_from: dict[TopicPartition, int] = {}
        self.archived = 0
        #: records appended to each partition since this archiver started (the refill before it is not counted):
        #: what the embedded broker took in small batches (ctxbus.core.broker_recycle)
        self.appended: dict[TopicPartition, int] = {}
        self._quiet_since = time.monotonic()
        self.ready = asyncio.Event()
        #: set by ``ctxbus up`` when its broker died: the stop reads nothing more from it and keeps the last
        #: snapshot of the groups' positions (one taken from a dead or an empty broker would be wrong)
        self.broker_gone = False
        #: this broker life's progress file (adapters/kafka/archive_progress.py), written now: the publishers of the
        #: round keep what they send under this life from their first record
        self._progress = start_life(root, uuid.uuid4().hex)

    async def run(self, stop: asyncio.Event) -> None:
        """Archive until ``stop``; broker trouble is logged and retried, never fatal."""
        # no group, no commits; not on the request path: it polls an idle broker rarely
        consumer = AIOKafkaConsumer(**self._config.consumer("archiver", None, background=True))
        admin = AIOKafkaAdminClient(**self._config.common("archiver"))
        # idle, it sleeps until a publisher rings (the embedded broker never wakes a waiting fetch)
        quiet = self._config.quiet(tuple(self._topics.all()), background=True)
        await consumer.start()
        await admin.start()
        try:
            self._resume_from = {TopicPartition(t, p): o + 1 for (t, p), o in last_archived(self._root).items()}
            await self._assign(consumer)
            self.ready.set()
            timers = _Timers(time.monotonic(), self._flush_s, self._offsets_s)
            while not stop.is_set():
                try:
                    await self._round(consumer, admin, quiet, timers, stop)
                except (KafkaError, TimeoutError) as exc:
                    log.warning("archive_broker_error", error=repr(exc))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)
            if self.broker_gone:
                await self._flush()
            else:
                await self._drain(consumer)
                with contextlib.suppress(KafkaError, OSError, TimeoutError):
                    await asyncio.wait_for(self._snapshot_offsets(admin), SNAPSHOT_TIMEOUT_S)
        finally:
            for writer in self._writers.values():
                writer.close()
            self._write_progress(self._held())
            self._state.save(self._root)
            for reader in self._group_readers.values():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(reader.stop(), CLOSE_TIMEOUT_S)
            await consumer.stop()
            with contextlib.suppress(Exception):
                await admin.close()
            log.info("archive_stopped", archived=self.archived)

    async def _round(
        self,
        consumer: AIOKafkaConsumer,
        admin: AIOKafkaAdminClient,
        quiet: Quiet | None,
        timers: _Timers,
        stop: asyncio.Event,
    ) -> None:
        """One poll and what is due after it; with the doorbell, an idle archiver sleeps until a ring (flushing
        and snapshotting only what changed)."""
        got = await self._poll(consumer, quiet.linger_ms if quiet is not None else FETCH_TIMEOUT_MS)
        timers.unflushed += got
        now = time.monotonic()
        if now >= timers.flush:
            if timers.unflushed or quiet is None:
                await self._flush()
                timers.unflushed = 0
            timers.flush = now + self._flush_s
        if now >= timers.offsets:
            # the groups' positions move only after records: once the topics were quiet for two snapshots, there
            # is nothing new to snapshot (the stop snapshots anyway)
            if quiet is None or self.idle_for(now) <= 2 * self._offsets_s:
                # bounded: on a dead broker the snapshot would wait for ever (the round ends, `up` restarts it)
                timers.unflushed += await asyncio.wait_for(self._snapshot_offsets(admin, consumer), SNAPSHOT_TIMEOUT_S)
            timers.offsets = now + self._offsets_s
        if now >= timers.rediscover:
            await self._assign(consumer)
            timers.rediscover = now + REDISCOVER_S
        if now >= timers.housekeeping:
            self._retention()
            timers.housekeeping = now + HOUSEKEEPING_S
        if quiet is not None and got:
            quiet.busy()
        elif quiet is not None and quiet.drowsy():
            # unflushed records must not wait longer than the flush interval
            await quiet.sleep(consumer, stop, timeout_s=max(0.0, timers.flush - now) if timers.unflushed else None)

    async def _assign(self, consumer: AIOKafkaConsumer) -> None:
        await consumer.topics()  # refresh what the client knows
        wanted = {
            TopicPartition(topic, p) for topic in self._topics.all() for p in consumer.partitions_for_topic(topic) or ()
        }
        fresh = sorted(wanted - self._assigned)
        if not fresh:
            return
        begins = await consumer.beginning_offsets(fresh)
        ends = await consumer.end_offsets(fresh)
        consumer.assign(sorted(wanted))
        for tp in sorted(wanted):
            if tp in fresh:
                base = self._state.base(tp.topic, tp.partition)
                resume = self._resume_from.get(tp)
                position = begins[tp] if resume is None else resume - base
                position = min(max(position, begins[tp]), max(ends[tp], begins[tp]))
                # the end Tansu reports is short when the last batch holds several records (a refill sends large
                # batches): reading may start below the resume point, but what is archived already stays skipped
                self._next[tp] = position + base if resume is None else max(position + base, resume)
            consumer.seek(tp, self._next[tp] - self._state.base(tp.topic, tp.partition))
        self._assigned = wanted
        log.info("archive_assigned", partitions=len(wanted))

    async def _poll(self, consumer: AIOKafkaConsumer, timeout_ms: int = FETCH_TIMEOUT_MS) -> int:
        if not self._assigned:
            await asyncio.sleep(timeout_ms / 1000.0)
            return 0
        batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=MAX_RECORDS)
        count = 0
        for tp, records in batch.items():
            for record in records:
                self._write(tp, record)
                count += 1
        return count

    def _write(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        offset = record.offset + self._state.base(tp.topic, tp.partition)
        if offset < self._next.get(tp, 0):
            return  # already archived (a re-read after a reconnect)
        writer = self._writers.get(tp)
        if writer is None:
            writer = self._writers[tp] = PartitionWriter(self._root, tp.topic, tp.partition)
        writer.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": offset,
                "timestamp": int(record.timestamp),
                "timestamp_type": int(record.timestamp_type or 0),
                "key": record.key,
                "value": record.value,
                "headers": [{"key": k, "value": v} for k, v in record.headers or ()],
            }
        )
        self._next[tp] = offset + 1
        self.archived += 1
        self.appended[tp] = self.appended.get(tp, 0) + 1
        self._quiet_since = time.monotonic()

    def fullest(self) -> tuple[int, str | None]:
        """Records appended to the fullest partition of an event topic since this archiver started (not the schemas
        topic's: every start of the services announces their schemas there again), and that partition
        (``topic/partition``; None when there is none)."""
        counts = [
            (n, f"{tp.topic}/{tp.partition}") for tp, n in self.appended.items() if tp.topic != self._topics.schemas
        ]
        if not counts:
            return 0, None
        return max(counts)

    def idle_for(self, now: float) -> float:
        """Seconds (``now`` on the monotonic clock) since a record was last archived, or since the archiver was
        made when none was."""
        return max(0.0, now - self._quiet_since)

    async def _flush(self) -> None:
        """Flush and fsync every partition's file in a worker thread: the services of ``ctxbus up`` share this
        event loop, and a slow disk must not stall them (nothing is appended meanwhile: this loop waits)."""
        writers = list(self._writers.values())
        held = self._held()

        def flush_all() -> None:
            for writer in writers:
                writer.flush()
            self._write_progress(held)

        await asyncio.to_thread(flush_all)

    def _held(self) -> dict[str, int]:
        """Per partition, the broker offset up to which the archive holds its records once the files are flushed."""
        return {
            tp_key(tp.topic, tp.partition): nxt - self._state.base(tp.topic, tp.partition)
            for tp, nxt in self._next.items()
        }

    def _write_progress(self, held: dict[str, int]) -> None:
        """What the archive holds, for the publishers that keep what they sent until it does."""
        if held != self._progress.archived:
            self._progress = Progress(self._progress.life, held, self._progress.lives)
            with contextlib.suppress(OSError):
                write_progress(self._root, self._progress)

    async def _drain(self, consumer: AIOKafkaConsumer) -> None:
        """Read on until a poll brings nothing (the end of every partition), within DRAIN_TIMEOUT_S."""
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        with contextlib.suppress(KafkaError):
            while time.monotonic() < deadline and await self._poll(consumer):
                pass
        await self._flush()

    async def _snapshot_offsets(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer | None = None) -> int:
        """The committed position of every consumer group of the prefix, in archive offsets; with ``consumer``, kept
        only once the archive read every partition up to its end as it was after the positions were read (else the
        last snapshot stays, and this one is tried again at the next interval); how many records that read.

        A service commits an input only after its outputs were acknowledged. A snapshot saved before the archive read
        those outputs would, after a broker death, skip the input and never bring the output back (an answer lost):
        so the archive first reads what the broker held then, outputs included."""
        groups = sorted(g for g, _kind in await admin.list_consumer_groups() if g.startswith(f"{self._topics.prefix}."))
        taken: dict[str, dict[str, int]] = {}
        for group in groups:
            reader = self._group_readers.get(group)
            if reader is None:
                reader = AIOKafkaConsumer(**self._config.consumer("archiver-offsets", group))
                await reader.start()
                self._group_readers[group] = reader
            positions = taken.setdefault(group, {})
            for tp in sorted(self._assigned):
                committed = await reader.committed(tp)
                if committed is not None:
                    positions[tp_key(tp.topic, tp.partition)] = committed + self._state.base(tp.topic, tp.partition)
        read = 0
        if consumer is not None and self._assigned:
            caught_up, read = await self._catch_up(consumer)
            if not caught_up:
                return read
        for group, positions in taken.items():
            self._state.groups.setdefault(group, {}).update(positions)
        await asyncio.to_thread(self._state.save, self._root)  # an fsync: off the services' loop
        return read

    async def _catch_up(self, consumer: AIOKafkaConsumer) -> tuple[bool, int]:
        """Read until every partition is archived up to its end as the broker reports it now, within CATCH_UP_S;
        whether it got there, and how many records it read."""
        ends = await consumer.end_offsets(sorted(self._assigned))

        def behind() -> bool:
            return any(
                self._next.get(tp, 0) - self._state.base(tp.topic, tp.partition) < end for tp, end in ends.items()
            )

        deadline, read = time.monotonic() + CATCH_UP_S, 0
        wait_ms = max(FETCH_TIMEOUT_MS, 2 * self._config.background_fetch_max_wait_ms)
        while behind() and (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            read += await self._poll(consumer, min(wait_ms, left_ms))
        return not behind(), read

    def _retention(self) -> None:
        files = scan(self._root)
        open_paths = {w.path for w in self._writers.values() if w.path is not None}
        for f in expired(
            files,
            now=datetime.fromtimestamp(self._clock(), UTC),
            retention_days=self._retention_days,
            retention_bytes=self._retention_bytes,
        ):
            if f.path in open_paths:
                continue
            with contextlib.suppress(OSError):
                f.path.unlink()
                log.info("archive_file_expired", path=str(f.path), bytes=f.size)
