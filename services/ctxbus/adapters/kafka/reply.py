"""Waiting for the injected event of one correlation id, without joining a consumer group.

The waiter assigns every partition of the injected topic and seeks to the end
*before* the request is published, so it sees the answer however fast it comes.
"""

from __future__ import annotations

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value


class InjectionWaiter:
    def __init__(self, config: KafkaClientConfig, topic: str) -> None:
        self._consumer = AIOKafkaConsumer(**config.consumer("reply", None))
        self._topic = topic
        self._deserialize = EventDeserializer()

    async def start(self) -> None:
        await self._consumer.start()
        await self._consumer.topics()  # metadata for the partition list
        partitions = self._consumer.partitions_for_topic(self._topic) or set()
        if not partitions:
            raise LookupError(f"topic {self._topic} does not exist")
        tps = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end positions now, not at the first fetch
            await self._consumer.position(tp)

    async def stop(self) -> None:
        await self._consumer.stop()

    async def wait(self, correlation_id: uuid.UUID, timeout_s: float) -> Envelope[ContextInjected]:
        """The first injected event with this correlation id; TimeoutError after ``timeout_s``."""
        wanted = str(correlation_id)
        async with asyncio.timeout(timeout_s):
            while True:
                batch = await self._consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    for rec in records:
                        if header_value(list(rec.headers or ()), HEADER_CORRELATION_ID) != wanted:
                            continue
                        try:
                            event = self._deserialize(rec.value)
                        except EventDecodeError:
                            continue
                        if isinstance(event.payload, ContextInjected):
                            return event
