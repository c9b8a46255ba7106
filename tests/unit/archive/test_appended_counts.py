"""The archiver counts what each partition took since it started (what ``up``'s broker recycling reads), and not
a record it had archived already."""

from __future__ import annotations

import time
from pathlib import Path

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.archive.archiver import Archiver
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings


def _record(tp: TopicPartition, offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=tp.topic,
        partition=tp.partition,
        offset=offset,
        timestamp=1_800_000_000_000,
        timestamp_type=0,
        key=b"k",
        value=b"v",
        checksum=None,
        serialized_key_size=1,
        serialized_value_size=1,
        headers=[],
    )


def test_fullest_partition_and_quiet_time(tmp_path: Path) -> None:
    archiver = Archiver(KafkaClientConfig(KafkaSettings(), "127.0.0.1:9", embedded=True), Topics("t"), tmp_path)
    a, b = TopicPartition("t.a", 0), TopicPartition("t.a", 1)
    assert archiver.fullest() == (0, None)
    made = time.monotonic()
    assert archiver.idle_for(made + 7.0) >= 7.0  # quiet since it was made
    for offset in range(3):
        archiver._write(a, _record(a, offset))
    archiver._write(b, _record(b, 0))
    archiver._write(a, _record(a, 1))  # read again after a reconnect: archived once, counted once
    assert archiver.appended == {a: 3, b: 1}
    assert archiver.fullest() == (3, "t.a/0")
    schemas = TopicPartition(Topics("t").schemas, 0)
    for offset in range(10):  # every start announces the schemas again: not what the recycling counts
        archiver._write(schemas, _record(schemas, offset))
    assert archiver.fullest() == (3, "t.a/0")
    now = time.monotonic()
    assert archiver.idle_for(now) < 1.0
    assert 4.0 <= archiver.idle_for(now + 5.0) <= 6.0
