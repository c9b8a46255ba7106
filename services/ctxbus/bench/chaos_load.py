"""The Kafka side of a chaos run: the request load, the poison, what the benchmark watches while it runs
(answers as they come, the high watermarks, the groups' committed offsets) and the read-back at the end."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import record_size
from ctxbus.adapters.kafka.publisher import EventPublisher, PreparedRecord
from ctxbus.bench.chaos_tally import DeadLetterSeen, EventSeen
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value

#: what a foreign producer may send: far more than ctxbus's own producers (the embedded broker takes it)
FOREIGN_MAX_REQUEST_BYTES = 64_000_000
#: a send the broker does not acknowledge is tried again (same bytes, same event id) this many times
SEND_ATTEMPTS = 30
SEND_RETRY_PAUSE_S = 1.0
#: a read-back stops when every partition is read to its high watermark, or after this long without records
READ_IDLE_S = 3.0
#: a committed-offset lookup that takes longer than this is skipped (the broker may be stalled)
LOOKUP_TIMEOUT_S = 5.0


def chaos_request(i: int, project: str, domain: str, prompt: str) -> Envelope[RetrievalRequested]:
    """Request ``i``: a fresh correlation id, one of 16 sessions."""
    payload = RetrievalRequested(
        agent_name="chaos", domain=domain, prompt=prompt, trigger=Trigger.USER_PROMPT, max_items=5
    )
    return Envelope.root(payload, project=project, session_id=f"chaos-{i % 16}", producer="bench-chaos")


async def send_until_acknowledged(publisher: EventPublisher, record: PreparedRecord) -> bool:
    """Send, and again after a failure (a stalled broker); False when it never was acknowledged."""
    for attempt in range(SEND_ATTEMPTS):
        try:
            await publisher.send(record)
            return True
        except KafkaError:
            if attempt + 1 < SEND_ATTEMPTS:
                await asyncio.sleep(SEND_RETRY_PAUSE_S)
    return False


class PoisonProducer:
    """Writes records as any client could (no ctxbus size guard, a 64 MB request limit)."""

    def __init__(self, config: KafkaClientConfig) -> None:
        self._producer = AIOKafkaProducer(
            **{**config.producer("bench-chaos-poison"), "max_request_size": FOREIGN_MAX_REQUEST_BYTES}
        )

    async def __aenter__(self) -> PoisonProducer:
        await self._producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._producer.stop()

    async def send(
        self, topic: str, partition: int, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
    ) -> int:
        """The offset the record got."""
        meta = await self._producer.send_and_wait(
            topic, value=value, key=key, partition=partition, headers=list(headers)
        )
        return int(meta.offset)


@dataclass
class Watch:
    """What the benchmark sees while the run goes: when each answer arrived, and how far each partition goes."""

    #: correlation id -> when the first injection arrived (perf_counter)
    injected_at: dict[str, float] = field(default_factory=dict)
    highwater: dict[TopicPartition, int] = field(default_factory=dict)
    #: topic -> when its high watermark last moved (perf_counter): records are flowing in
    grew_at: dict[str, float] = field(default_factory=dict)


async def watch(
    config: KafkaClientConfig, topics: Sequence[str], injected_topic: str, seen: Watch, stop: asyncio.Event
) -> None:
    """Follow ``topics`` from the beginning (no group), noting answers by their correlation-id header."""
    consumer = AIOKafkaConsumer(**config.consumer("bench-chaos-watch", None))
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for tp, records in batch.items():
                if tp.topic != injected_topic:
                    continue
                for rec in records:
                    cid = header_value(list(rec.headers or ()), HEADER_CORRELATION_ID)
                    if cid is not None:
                        seen.injected_at.setdefault(cid, now)
            for tp in tps:
                high = consumer.highwater(tp)
                if isinstance(high, int) and high > seen.highwater.get(tp, 0):
                    seen.highwater[tp] = high
                    seen.grew_at[tp.topic] = now
    finally:
        await consumer.stop()


class CommittedOffsets:
    """The committed offsets of consumer groups, looked up without joining them."""

    def __init__(self, config: KafkaClientConfig, groups: Sequence[str]) -> None:
        self._consumers = {g: AIOKafkaConsumer(**config.consumer("bench-chaos-offsets", g)) for g in groups}

    async def __aenter__(self) -> CommittedOffsets:
        for consumer in self._consumers.values():
            await consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for consumer in self._consumers.values():
            await consumer.stop()

    async def lag(self, group: str, partitions: Sequence[TopicPartition], highwater: dict[TopicPartition, int]) -> int:
        """Records on ``partitions`` the group has not committed yet (-1 when a lookup failed)."""
        consumer = self._consumers[group]
        behind = 0
        for tp in partitions:
            try:
                committed = await asyncio.wait_for(consumer.committed(tp), LOOKUP_TIMEOUT_S)
            except (KafkaError, TimeoutError):
                return -1
            behind += max(0, highwater.get(tp, 0) - (committed or 0))
        return behind


async def read_topic(config: KafkaClientConfig, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic``: up to each partition's high watermark (the embedded broker reports some end
    offsets short), or until nothing came for READ_IDLE_S."""
    consumer = AIOKafkaConsumer(**config.consumer("bench-chaos-readback", None))
    await consumer.start()
    records: list[ConsumerRecord[bytes, bytes]] = []
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for recs in batch.values():
                records.extend(recs)
            if any(batch.values()):
                idle_since = loop.time()
            done = True
            for tp in tps:
                high = consumer.highwater(tp)
                end = max(ends[tp], high if isinstance(high, int) else 0)
                if await consumer.position(tp) < end or (high is None and ends[tp] > 0):
                    done = False
            if done or loop.time() - idle_since > READ_IDLE_S:
                break
    finally:
        with contextlib.suppress(asyncio.CancelledError):
            await consumer.stop()
    return records


def events_of(records: Sequence[ConsumerRecord[bytes, bytes]]) -> tuple[list[EventSeen], list[tuple[str, int, int]]]:
    """The (correlation id, event id) of every event, and the positions of the records that are not events."""
    deserialize = EventDeserializer()
    events, undecodable = [], []
    for rec in records:
        try:
            event = deserialize(rec.value)
        except EventDecodeError:
            undecodable.append((rec.topic, rec.partition, rec.offset))
            continue
        events.append(EventSeen(str(event.correlation_id), str(event.event_id)))
    return events, undecodable


def dead_letters_of(records: Sequence[ConsumerRecord[bytes, bytes]]) -> list[DeadLetterSeen]:
    return [
        DeadLetterSeen(r.key, r.value, tuple(r.headers or ()), record_size(r.key, r.value, list(r.headers or ())))
        for r in records
    ]
