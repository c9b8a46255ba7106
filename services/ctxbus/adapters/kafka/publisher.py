"""Publishing envelopes: Avro body, routing headers, key = entity id, acknowledged sends.

Every event's payload is redacted as it is encoded (:func:`ctxbus.redact.default.redact_strings`: the door every
ctxbus producer passes, so no topic, and so neither the archive, the record nor the store, holds a secret or a
``<private>`` span; docs/privacy.md). Every record is sized first: one over ``CTXBUS_KAFKA_MAX_RECORD_BYTES`` raises
:class:`~ctxbus.adapters.kafka.limits.RecordTooLarge` and never reaches the producer client.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka import broker_gone
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import check_record_size
from ctxbus.adapters.kafka.resend import Kept, keeper_for
from ctxbus.adapters.kafka.schemas_topic import announcements
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.serde import EventSerializer, Headers, event_headers
from ctxbus.redact.default import redact_strings

log = structlog.get_logger("ctxbus.publisher")
#: payload fields that are ids the readers join on, kept as they are (an id is a name, not a secret)
ID_FIELDS = frozenset(
    {"id", "ids", "item_ids", "global_item_ids", "supersedes", "superseded_by", "cluster_id", "into", "task_id"}
    | {"session_id", "fingerprint", "embedding_model"}
)


def scrub_payload(payload: dict[str, Any]) -> None:
    """The publisher's door: every string of the payload redacted but its ids (docs/privacy.md), and but the ranked
    items of a retrieval's answer (``retrieval.completed``: read from the store, redacted when they were stored)."""
    # a retrieval's ranked items come from the store, whose door (ingestion) redacted them: scanning them again
    # cost about 4 ms of every request's path for ten items (the request copied into the event is still scanned)
    stored = payload.pop("items") if "candidates_considered" in payload and "request" in payload else None
    redact_strings(payload, ID_FIELDS)
    if stored is not None:
        payload["items"] = stored


#: how long a starting publisher may spend announcing its schemas (``ctxbus topics create`` makes the topic)
ANNOUNCE_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class PreparedRecord:
    """An encoded record that fits the size limit, ready to send."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers
    size: int


class EventPublisher:
    """Owns one producer; ``publish`` returns once the broker has acknowledged the event."""

    def __init__(
        self,
        config: KafkaClientConfig,
        client_id: str,
        serializer: EventSerializer | None = None,
        *,
        schemas_topic: str | None = None,
    ):
        """``schemas_topic``: where to announce the schemas this publisher writes with when it starts
        (``Topics.schemas``; adapters.kafka.schemas_topic), so readers with older ``schemas/`` can learn them."""
        self._producer = AIOKafkaProducer(**config.producer(client_id))
        broker_gone.register(self._producer, config.bootstrap_servers)  # its records in flight fail if it dies
        self._serialize = serializer or EventSerializer(scrub=scrub_payload)
        self.max_record_bytes = config.settings.max_record_bytes
        self._schemas_topic = schemas_topic
        #: rung once the broker holds a record (the embedded broker's consumers sleep until then; None: off)
        self._bell = config.doorbell
        #: what this process sent that ``up``'s archive may not hold yet (None: not on an archived embedded broker)
        self._keeper = keeper_for(config.archive) if config.archive is not None else None

    async def start(self) -> None:
        try:
            await self._producer.start()
        except BaseException:
            await self._producer.stop()  # a producer that could not connect is closed, not leaked
            raise
        if self._schemas_topic is not None:
            await self._announce(self._schemas_topic)
        await self.resend_due()

    async def _announce(self, topic: str) -> None:
        """Publish the current schema documents (best effort: a reader without them dead-letters, it does not
        misread, so a broker that refuses them must not stop the producer)."""

        async def send_all() -> None:
            sends = [await self._producer.send(topic, value=value, key=key) for key, value in announcements()]
            await asyncio.gather(*sends)
            self._ring(topic)

        try:  # bounded: a cluster without the topic (and no auto-creation) must not hold up the first event
            await asyncio.wait_for(send_all(), ANNOUNCE_TIMEOUT_S)
        except (KafkaError, TimeoutError) as exc:
            log.warning("schemas_not_announced", topic=topic, error=repr(exc))

    async def stop(self) -> None:
        await self._producer.stop()

    async def __aenter__(self) -> EventPublisher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def prepare(self, topic: str, event: AnyEnvelope) -> PreparedRecord:
        """Encode an event; RecordTooLarge when it is over the limit."""
        body = self._serialize(event)
        headers = event_headers(event, self._serialize.schema_id(event.event_type))
        return self.prepare_raw(topic, body, str(event.entity_id).encode(), headers)

    def prepare_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: Headers) -> PreparedRecord:
        size = check_record_size(topic, key, value, headers, self.max_record_bytes)
        return PreparedRecord(topic, key, value, headers, size)

    async def send(self, record: PreparedRecord) -> Any:
        """Send a prepared record and wait for the acknowledgement; returns the record metadata. On ``up``'s embedded
        broker, what an earlier broker acknowledged and lost goes again first, and the record is kept until the
        archive holds it."""
        await self.resend_due()
        return await self._send_kept(record.topic, record.key, record.value, tuple(record.headers), None, None)

    async def _send_kept(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes], ...],
        partition: int | None,
        timestamp_ms: int | None,
    ) -> Any:
        life = self._keeper.life if self._keeper is not None else None
        metadata = await self._producer.send_and_wait(
            topic, value=value, key=key, headers=list(headers), partition=partition, timestamp_ms=timestamp_ms
        )
        self._ring(topic)
        if self._keeper is not None and life is not None and metadata is not None:
            stamp = int(metadata.timestamp) if metadata.timestamp is not None and metadata.timestamp >= 0 else None
            self._keeper.keep(
                Kept(life, topic, metadata.partition, metadata.offset, key, value, headers, stamp or timestamp_ms)
            )
        return metadata

    async def resend_due(self) -> int:
        """Send again what an earlier embedded broker acknowledged and lost before the archive held it (nothing when
        the broker did not die); how many records."""
        if self._keeper is None:
            return 0
        due = self._keeper.due()
        for i, kept in enumerate(due):
            try:
                await self._send_kept(kept.topic, kept.key, kept.value, kept.headers, kept.partition, kept.timestamp_ms)
            except BaseException:
                for rest in due[i:]:  # due again next time (under a life the file does not know: all of them)
                    self._keeper.keep(replace(rest, life=""))
                raise
        if due:
            self._keeper.resent += len(due)
            log.warning("records_resent", records=len(due), reason="the broker died before the archive held them")
        return len(due)

    async def enqueue(self, record: PreparedRecord) -> asyncio.Future[Any]:
        """Hand a prepared record to the producer without waiting for the broker: the returned future is its
        acknowledgement. Records enqueued one after another reach a partition in that order (the producer
        keeps one request in flight per partition)."""
        ack: asyncio.Future[Any] = await self._producer.send(
            record.topic, value=record.value, key=record.key, headers=record.headers
        )
        if self._bell is not None:
            ack.add_done_callback(lambda done: self._ring(record.topic) if _acknowledged(done) else None)
        return ack

    def _ring(self, topic: str) -> None:
        """Wake the consumers of ``topic`` (in every process of the stack), the record being on the broker."""
        if self._bell is not None:
            self._bell.ring(topic)

    async def publish(self, topic: str, event: AnyEnvelope) -> Any:
        """Send one event and wait for the acknowledgement; returns the record metadata."""
        return await self.send(self.prepare(topic, event))

    async def publish_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: Headers) -> Any:
        return await self.send(self.prepare_raw(topic, value, key, headers))


def _acknowledged(ack: asyncio.Future[Any]) -> bool:
    return not ack.cancelled() and ack.exception() is None
