"""A topic's end offsets now: where every record produced (and acknowledged) so far ends, per partition.

A consumer with no group: it never joins, never commits and reads nothing but what it needs to know the ends.
The embedded broker (Tansu) reports a partition's end as the base offset of its last record batch plus one,
short when that batch holds several records; its fetch responses carry the true high watermark, so on the
embedded broker the last reported record of each non-empty partition is fetched once and its high watermark
taken (as ``ctxbus.replay.read`` does).
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.config import KafkaClientConfig

#: how long one probe of the true ends waits for the records it fetched
PROBE_TIMEOUT_S = 2.0
POLL_MS = 50


class TopicEnds:
    def __init__(self, config: KafkaClientConfig, topic: str, client_id: str = "topic-ends") -> None:
        self._config = config
        self._topic = topic
        self._consumer = AIOKafkaConsumer(**config.consumer(client_id, None))
        self._partitions: list[TopicPartition] = []
        self._lock = asyncio.Lock()
        self._started = False

    async def start(self) -> None:
        await self._consumer.start()
        self._started = True

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._consumer.stop()

    async def _known(self) -> list[TopicPartition]:
        if not self._partitions:
            await self._consumer.topics()
            found = self._consumer.partitions_for_topic(self._topic) or set()
            if not found:
                raise MissingTopic(self._topic)
            self._partitions = [TopicPartition(self._topic, p) for p in sorted(found)]
        return self._partitions

    async def ends(self) -> dict[int, int]:
        """Partition -> the offset after its last record, as the broker has it now."""
        async with self._lock:
            if not self._started:
                await self.start()
            tps = await self._known()
            reported = await self._consumer.end_offsets(tps)
            ends = {tp.partition: int(reported[tp]) for tp in tps}
            if self._config.embedded:
                ends = await self._true_ends(tps, ends)
            return ends

    async def _true_ends(self, tps: list[TopicPartition], reported: dict[int, int]) -> dict[int, int]:
        probe = [tp for tp in tps if reported[tp.partition] > 0]
        if not probe:
            return reported
        consumer = self._consumer
        consumer.assign(probe)
        try:
            for tp in probe:
                consumer.seek(tp, reported[tp.partition] - 1)
            waiting = set(probe)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + PROBE_TIMEOUT_S
            while waiting and loop.time() < deadline:
                batch = await consumer.getmany(*waiting, timeout_ms=POLL_MS)
                waiting -= {tp for tp, records in batch.items() if records}
            ends = dict(reported)
            for tp in probe:
                high = consumer.highwater(tp)
                if isinstance(high, int) and high > ends[tp.partition]:
                    ends[tp.partition] = high
            return ends
        finally:
            consumer.assign([])

    async def __aenter__(self) -> TopicEnds:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
