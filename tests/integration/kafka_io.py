"""Small helpers for tests: publish raw bytes, read a whole topic, read a group's committed offsets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig

#: what a foreign producer may send: far more than ctxbus's own producers (the embedded broker takes it)
FOREIGN_MAX_REQUEST_BYTES = 64_000_000


async def send_raw(
    config: KafkaClientConfig,
    topic: str,
    value: bytes | None,
    key: bytes | None = b"k",
    partition: int | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
) -> tuple[int, int]:
    """One record as any client could write it (no ctxbus size guard, a 64 MB request limit)."""
    producer = AIOKafkaProducer(**{**config.producer("test"), "max_request_size": FOREIGN_MAX_REQUEST_BYTES})
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, value=value, key=key, partition=partition, headers=list(headers))
        return int(meta.partition), int(meta.offset)
    finally:
        await producer.stop()


async def read_all(
    config: KafkaClientConfig, topic: str, *, expect: int, timeout_s: float = 15.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` once at least ``expect`` are there (then a short settle for extras)."""
    consumer = AIOKafkaConsumer(**config.consumer("test-reader", None))
    await consumer.start()
    records: list[ConsumerRecord[bytes, bytes]] = []
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = asyncio.get_running_loop().time() + timeout_s
        settle_until: float | None = None
        while True:
            now = asyncio.get_running_loop().time()
            if now > deadline or (settle_until is not None and now > settle_until):
                break
            batch = await consumer.getmany(timeout_ms=100)
            for recs in batch.values():
                records.extend(recs)
            if settle_until is None and len(records) >= expect:
                settle_until = now + 0.5
    finally:
        await consumer.stop()
    return records


async def committed(config: KafkaClientConfig, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition (partitions with none are left out)."""
    consumer = AIOKafkaConsumer(**config.consumer("test-committed", group))
    await consumer.start()
    try:
        await consumer.topics()
        result = {}
        for p in sorted(consumer.partitions_for_topic(topic) or ()):
            offset = await consumer.committed(TopicPartition(topic, p))
            if offset is not None:
                result[p] = offset
        return result
    finally:
        await consumer.stop()


async def end_offsets(config: KafkaClientConfig, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(**config.consumer("test-ends", None))
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: off for tp, off in ends.items() if off > 0}
    finally:
        await consumer.stop()


async def caught_up(config: KafkaClientConfig, group: str, topic: str) -> bool:
    """Whether the group has committed everything on ``topic``."""
    return await committed(config, group, topic) == await end_offsets(config, topic)


async def wait_caught_up(
    config: KafkaClientConfig, group: str, topic: str, alive: Callable[[], bool] = lambda: True, timeout_s: float = 60
) -> None:
    """Until the group has committed everything on ``topic``; fails if ``alive`` turns false first."""
    async with asyncio.timeout(timeout_s):
        while not await caught_up(config, group, topic):
            assert alive(), "the consumer stopped before catching up"
            await asyncio.sleep(0.2)
