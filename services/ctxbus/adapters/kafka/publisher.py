"""Publishing envelopes: Avro body, routing headers, key = entity id, acknowledged sends."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.serde import EventSerializer, Headers, event_headers


class EventPublisher:
    """Owns one producer; ``publish`` returns once the broker has acknowledged the event."""

    def __init__(self, config: KafkaClientConfig, client_id: str, serializer: EventSerializer | None = None):
        self._producer = AIOKafkaProducer(**config.producer(client_id))
        self._serialize = serializer or EventSerializer()

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def __aenter__(self) -> EventPublisher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def publish(self, topic: str, event: AnyEnvelope) -> Any:
        """Send one event and wait for the acknowledgement; returns the record metadata."""
        body = self._serialize(event)
        headers = event_headers(event, self._serialize.schema_id(event.event_type))
        return await self._producer.send_and_wait(topic, value=body, key=str(event.entity_id).encode(), headers=headers)

    async def publish_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: Headers) -> Any:
        return await self._producer.send_and_wait(topic, value=value, key=key, headers=headers)
