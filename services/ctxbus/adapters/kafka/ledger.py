"""Which inputs a service has already answered, so a redelivered input is not answered twice.

Seeded at start from the causation ids on the tail of the service's output
topics (what it produced before a crash but did not commit), then kept up to
date as it processes. Bounded: the oldest ids are forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.serde import HEADER_CAUSATION_ID, header_value


class AnsweredLedger:
    def __init__(self, capacity: int = 50_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        while len(self._ids) > self._capacity:
            self._ids.popitem(last=False)

    def extend(self, event_ids: Iterable[str]) -> None:
        for event_id in event_ids:
            self.add(event_id)


#: the header a loop of a group of its own puts on its outputs: answers of other members are not its answers
HEADER_ANSWERED_BY = "ctxbus-answered-by"


async def recent_causes(
    config: KafkaClientConfig, topics: Iterable[str], window: int, answered_by: str | None = None
) -> list[str]:
    """Causation ids of the last ``window`` events of each partition of ``topics`` (with ``answered_by``: only of
    the events that carry it in their HEADER_ANSWERED_BY header)."""
    consumer = AIOKafkaConsumer(**config.consumer("ledger", None))
    await consumer.start()
    causes: list[str] = []
    try:
        await consumer.topics()  # metadata, so the partition lists are known
        partitions = [
            TopicPartition(topic, p) for topic in topics for p in (consumer.partitions_for_topic(topic) or ())
        ]
        if not partitions:
            return causes
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        begins = await consumer.beginning_offsets(partitions)
        pending = {tp for tp in partitions if ends[tp] > begins[tp]}
        for tp in pending:
            consumer.seek(tp, max(begins[tp], ends[tp] - window))
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=500)
            for records in batch.values():
                for rec in records:
                    headers = list(rec.headers or ())
                    if answered_by is not None and header_value(headers, HEADER_ANSWERED_BY) != answered_by:
                        continue
                    cause = header_value(headers, HEADER_CAUSATION_ID)
                    if cause:
                        causes.append(cause)
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
    finally:
        await consumer.stop()
    return causes
