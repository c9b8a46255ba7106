"""Refill a fresh broker from the archive before the services start: history, timestamps and positions.

Every archived partition of the prefix's topics is produced again, in offset order, to the same
partition, with its key, value, headers and original timestamp (CreateTime). The broker numbers the
records from 0: the per-partition base in ``state.json`` maps its offsets back to the archive's, so
the archiver resumes after the last archived record, and the consumer groups' snapshotted positions
are committed again, translated, so the services go on where they were and process nothing twice
(what they did after the last snapshot, they skip: redelivery is idempotent, docs/guarantees.md). A partition
that already holds records (a broker that kept its data, a real cluster) is left alone.
"""

from __future__ import annotations

import bisect
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.archive.files import ReadStats, read_partition, scan
from ctxbus.archive.layout import ArchivedFile
from ctxbus.archive.state import ArchiveState, split_key, tp_key
from ctxbus.contract.topics import Topics

log = structlog.get_logger("ctxbus.archive")

#: sends in flight before waiting for their acknowledgements
WINDOW = 2_000
#: the refill's batches: the broker's fetch cost grows with the batches a partition holds (ctxbus.core.broker_recycle),
#: and the producer's default (16 KiB) holds a few completed or injected events at most; a record larger than this
#: still goes, in a batch of its own
BATCH_BYTES = 512 * 1024
#: how long a batch may wait for more records before it is sent
LINGER_MS = 5


@dataclass
class RestoreReport:
    records: dict[str, int] = field(default_factory=dict)
    skipped_partitions: list[str] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)
    damaged_files: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.records.values())


async def restore(config: KafkaClientConfig, topics: Topics, root: Path) -> RestoreReport:
    """Produce the archive back into the broker (see the module doc); returns what was restored."""
    report = RestoreReport()
    by_partition: dict[tuple[str, int], list[ArchivedFile]] = defaultdict(list)
    ours = set(topics.all())
    for f in scan(root):
        if f.topic in ours:
            by_partition[f.key].append(f)
    if not by_partition:
        return report
    state = ArchiveState.load(root)
    stats = ReadStats()
    probe = AIOKafkaConsumer(**config.consumer("archive-restore", None))
    producer = AIOKafkaProducer(
        **{**config.producer("archive-restore"), "max_batch_size": BATCH_BYTES, "linger_ms": LINGER_MS}
    )
    await probe.start()
    await producer.start()
    renumbered: dict[tuple[str, int], list[int]] = {}
    try:
        await probe.topics()
        for (topic, partition), files in sorted(by_partition.items()):
            tp = TopicPartition(topic, partition)
            if partition not in (probe.partitions_for_topic(topic) or set()):
                report.skipped_partitions.append(f"{tp_key(topic, partition)} (no such partition on the broker)")
                continue
            if (await probe.end_offsets([tp]))[tp] > 0:
                report.skipped_partitions.append(f"{tp_key(topic, partition)} (the broker already holds records)")
                continue
            offsets = await _produce(producer, tp, files, stats)
            if offsets:
                renumbered[(topic, partition)] = offsets
                # archive offset = broker offset + base, for the records the archiver will see next
                state.bases[tp_key(topic, partition)] = offsets[-1] + 1 - len(offsets)
                report.records[topic] = report.records.get(topic, 0) + len(offsets)
    finally:
        await producer.stop()
        await probe.stop()
    report.damaged_files = stats.damaged_files
    report.groups = await _restore_positions(config, state, renumbered)
    state.save(root)
    log.info("archive_restored", records=report.total, groups=report.groups, skipped=report.skipped_partitions)
    return report


async def _produce(
    producer: AIOKafkaProducer, tp: TopicPartition, files: list[ArchivedFile], stats: ReadStats
) -> list[int]:
    offsets: list[int] = []
    pending = []
    for record in read_partition(files, stats):
        headers = [(h["key"], h["value"] if h["value"] is not None else b"") for h in record["headers"]]
        pending.append(
            await producer.send(
                tp.topic,
                value=record["value"],
                key=record["key"],
                partition=tp.partition,
                timestamp_ms=record["timestamp"],
                headers=headers,
            )
        )
        offsets.append(int(record["offset"]))
        if len(pending) >= WINDOW:
            for fut in pending:
                await fut
            pending.clear()
    for fut in pending:
        await fut
    return offsets


async def _restore_positions(
    config: KafkaClientConfig, state: ArchiveState, renumbered: dict[tuple[str, int], list[int]]
) -> dict[str, int]:
    """Commit every snapshotted group position again, as the restored broker numbers the records."""
    restored: dict[str, int] = {}
    for group, positions in sorted(state.groups.items()):
        commits: dict[TopicPartition, OffsetAndMetadata] = {}
        for key, archive_offset in positions.items():
            topic, partition = split_key(key)
            offsets = renumbered.get((topic, partition))
            if offsets is None:
                continue
            # the broker offset of the first record at or after the committed archive offset
            commits[TopicPartition(topic, partition)] = OffsetAndMetadata(
                bisect.bisect_left(offsets, archive_offset), ""
            )
        if not commits:
            continue
        consumer = AIOKafkaConsumer(**config.consumer("archive-restore", group))
        await consumer.start()
        try:
            consumer.assign(sorted(commits))
            await consumer.commit(commits)
            restored[group] = len(commits)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
    return restored
