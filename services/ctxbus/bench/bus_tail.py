"""A benchmark's view of the bus: a consumer with no group, assigned every partition of some topics and placed
at their ends, so it sees only what is written from now on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig


@contextlib.asynccontextmanager
async def tail(
    config: KafkaClientConfig, client_id: str, topic_names: Iterable[str]
) -> AsyncIterator[AIOKafkaConsumer]:
    """A started consumer at the end of every partition of ``topic_names`` (positions resolved before it is
    handed over, so nothing written afterwards is missed); stopped on exit."""
    consumer = AIOKafkaConsumer(**config.consumer(client_id, None))
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(t, p) for t in topic_names for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        yield consumer
    finally:
        await consumer.stop()
