"""Publishing envelopes: Avro body, routing headers, key = entity id, acknowledged sends.

Every record is sized first: one over ``CTXBUS_KAFKA_MAX_RECORD_BYTES`` raises
:class:`~ctxbus.adapters.kafka.limits.RecordTooLarge` and never reaches the producer client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import check_record_size
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.serde import EventSerializer, Headers, event_headers


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

    def __init__(self, config: KafkaClientConfig, client_id: str, serializer: EventSerializer | None = None):
        self._producer = AIOKafkaProducer(**config.producer(client_id))
        self._serialize = serializer or EventSerializer()
        self.max_record_bytes = config.settings.max_record_bytes

    async def start(self) -> None:
        await self._producer.start()

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
        """Send a prepared record and wait for the acknowledgement; returns the record metadata."""
        return await self._producer.send_and_wait(
            record.topic, value=record.value, key=record.key, headers=record.headers
        )

    async def publish(self, topic: str, event: AnyEnvelope) -> Any:
        """Send one event and wait for the acknowledgement; returns the record metadata."""
        return await self.send(self.prepare(topic, event))

    async def publish_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: Headers) -> Any:
        return await self.send(self.prepare_raw(topic, value, key, headers))
