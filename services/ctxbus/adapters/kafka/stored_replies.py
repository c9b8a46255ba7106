"""Waiting for the store owner's ``memory.stored`` answers to one's ``memory.upserted`` events.

Like the injection replies (:mod:`ctxbus.adapters.kafka.reply`): no consumer group; every partition of the
answer topic is assigned and read from its end, positions resolved at start, so an answer to an event published
after :meth:`StoredReplies.start` is always seen. Answers are picked by their correlation id (a header, read
before decoding) and matched to the upsert they answer by their causation id. One instance serves one caller
(``ctxbus memory import``, one pattern-file sync).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MAX_ITEMS_PER_UPSERT, MemoryStored, MemoryUpserted
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value
from ctxbus.core.curation import allow_forgotten_marker
from ctxbus.memory.global_scope import marker
from ctxbus.memory.model import MemoryItem

log = structlog.get_logger("ctxbus.reply")

Stored = Envelope[MemoryStored]


class StoredReplies:
    def __init__(self, config: KafkaClientConfig, topic: str) -> None:
        self._consumer = AIOKafkaConsumer(**config.consumer("stored-reply", None))
        self._topic = topic
        self._deserialize = EventDeserializer()
        #: correlation ids asked about -> event ids (the answers' causation ids) not yet answered
        self._pending: dict[str, set[str]] = {}
        self._items: dict[str, int] = {}
        self.answers: dict[str, Stored] = {}

    async def start(self) -> None:
        await self._consumer.start()
        await self._consumer.topics()
        partitions = self._consumer.partitions_for_topic(self._topic) or set()
        if not partitions:
            await self._consumer.stop()
            raise MissingTopic(self._topic)
        tps = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end positions now, not at the first fetch
            await self._consumer.position(tp)

    async def stop(self) -> None:
        await self._consumer.stop()

    async def __aenter__(self) -> StoredReplies:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def expect(self, event: Envelope[MemoryUpserted]) -> None:
        """Register an upsert before publishing it: its answer is the memory.stored event it causes."""
        self._pending.setdefault(str(event.correlation_id), set()).add(str(event.event_id))
        self._items[str(event.event_id)] = len(event.payload.items)

    @property
    def expected_items(self) -> int:
        return sum(self._items.values())

    @property
    def confirmed_items(self) -> int:
        """Items of the expected upserts that the store's owner has answered for."""
        return sum(len(a.payload.results) for a in self.answers.values())

    @property
    def done(self) -> bool:
        return not any(self._pending.values())

    async def wait(self, timeout_s: float, on_answer: Callable[[Stored], None] | None = None) -> bool:
        """Read answers until every expected upsert is answered (True) or ``timeout_s`` passes (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.done:
            left = deadline - loop.time()
            if left <= 0:
                return False
            batch = await self._consumer.getmany(timeout_ms=int(min(200, max(1, left * 1000))))
            for records in batch.values():
                for rec in records:
                    answer = self._match(header_value(list(rec.headers or ()), HEADER_CORRELATION_ID), rec.value)
                    if answer is not None and on_answer is not None:
                        on_answer(answer)
        return True

    def _match(self, correlation: str | None, value: bytes | None) -> Stored | None:
        waiting = self._pending.get(correlation or "")
        if not waiting:
            return None
        try:
            event = self._deserialize(value)
        except EventDecodeError as exc:
            log.warning("stored_reply_undecodable", reason=exc.reason)
            return None
        cause = str(event.causation_id)
        if not isinstance(event.payload, MemoryStored) or cause not in waiting:
            return None  # another stage of the chain, or an answer already counted (redelivery)
        waiting.discard(cause)
        stored: Stored = event
        self.answers[cause] = stored
        return stored


async def send_upserts(
    publisher: EventPublisher,
    topic: str,
    items: Sequence[MemoryItem],
    *,
    project: str,
    session_id: str,
    producer: str,
    replies: StoredReplies | None = None,
    global_write: bool = False,
    allow_forgotten: bool = False,
) -> list[Envelope[MemoryUpserted]]:
    """Send the items to the store's owner in upsert events of at most MAX_ITEMS_PER_UPSERT items that fit the
    record limit (a chunk over it is halved until it fits; one item over it raises RecordTooLarge), all with one
    correlation id (so are the answers). Each event is registered with ``replies`` (when given) before it is sent.
    ``global_write``: the records carry the marker that lets global items in (ctxbus.memory.global_scope; only a
    caller the user flagged sets it); ``allow_forgotten``: they carry the marker that re-adds forgotten items
    (ctxbus.core.curation). Returns the events sent, in order."""
    correlation = uuid.uuid4()
    sent: list[Envelope[MemoryUpserted]] = []

    async def send(chunk: tuple[MemoryItem, ...]) -> None:
        event = Envelope.root(
            MemoryUpserted(items=chunk),
            project=project,
            session_id=session_id,
            producer=producer,
            correlation_id=correlation,
        )
        try:
            record = publisher.prepare(topic, event)
            extra = [marker()] if global_write else []
            extra += [allow_forgotten_marker()] if allow_forgotten else []
            if extra:
                record = publisher.prepare_raw(topic, record.value, record.key, [*record.headers, *extra])
        except RecordTooLarge:
            if len(chunk) == 1:
                raise
            half = len(chunk) // 2
            await send(chunk[:half])
            await send(chunk[half:])
            return
        if replies is not None:
            replies.expect(event)
        await publisher.send(record)
        sent.append(event)

    for start in range(0, len(items), MAX_ITEMS_PER_UPSERT):
        await send(tuple(items[start : start + MAX_ITEMS_PER_UPSERT]))
    return sent
