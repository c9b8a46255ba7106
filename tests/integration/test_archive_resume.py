"""After a refill, the archiver goes on after what it already holds: nothing archived twice, nothing counted as
new (issue 11's broker recycling reads the count). Tansu reports a partition's end short when its last batch holds
several records, and the refill sends in large batches: the archiver must not take that end for the truth."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.archive.archiver import Archiver
from ctxbus.archive.files import read_file, scan
from ctxbus.archive.restore import restore
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

pytestmark = [pytest.mark.integration]

TOPICS = Topics("resume")


def _config(broker: EmbeddedBroker) -> KafkaClientConfig:
    return KafkaClientConfig(KafkaSettings(enable_idempotence=False), broker.bootstrap_servers, embedded=True)


async def _archive_for(config: KafkaClientConfig, root: Path, seconds: float) -> Archiver:
    archiver = Archiver(config, TOPICS, root, flush_interval_s=0.1, offsets_interval_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(archiver.run(stop))
    await asyncio.sleep(seconds)
    stop.set()
    await task
    return archiver


async def _fill(config: KafkaClientConfig, count: int, start: int) -> None:
    producer = AIOKafkaProducer(**config.producer("test"))
    await producer.start()
    try:
        for i in range(start, start + count):  # one record a batch, as the request path sends them
            await producer.send_and_wait(TOPICS.retrieval_requested, value=f"r{i}".encode(), key=b"k", partition=0)
    finally:
        await producer.stop()


def _archived_offsets(root: Path) -> list[int]:
    return [int(r["offset"]) for f in scan(root) if f.topic == TOPICS.retrieval_requested for r in read_file(f.path)]


async def test_a_refilled_partition_is_not_archived_again(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    with EmbeddedBroker() as first:
        config = _config(first)
        await ensure_topics(config, TOPICS.all(), partitions=1, replication=1, compacted=(TOPICS.schemas,))
        await _fill(config, 8, 0)
        await _archive_for(config, root, 1.5)
    assert sorted(_archived_offsets(root)) == list(range(8))

    with EmbeddedBroker() as second:  # a fresh broker, refilled in large batches
        config = _config(second)
        await ensure_topics(config, TOPICS.all(), partitions=1, replication=1, compacted=(TOPICS.schemas,))
        report = await restore(config, TOPICS, root)
        assert report.records == {TOPICS.retrieval_requested: 8}
        archiver = await _archive_for(config, root, 1.5)
        assert archiver.appended == {}  # nothing new was written
        await _fill(config, 3, 8)
        archiver = await _archive_for(config, root, 1.5)
        assert archiver.fullest() == (3, f"{TOPICS.retrieval_requested}/0")

    offsets = _archived_offsets(root)
    assert [o for o, n in Counter(offsets).items() if n > 1] == []  # nothing archived twice
    assert sorted(offsets) == list(range(11))
