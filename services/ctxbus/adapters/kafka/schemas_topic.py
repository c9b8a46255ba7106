"""The schemas topic (``PREFIX.schemas``, compacted, one partition): producers publish, readers learn.

Every ctxbus producer announces the schema ids it writes with when it starts (contract.schema_doc
documents, keyed by id). A consumer that meets a schema id its own ``schemas/`` does not list reads
the topic (at most every ``refresh_s`` per unknown id) and, if a newer producer published it, learns it
and decodes the record against its own version: full compatibility makes that work. What still cannot
be read is dead-lettered with a message that tells the operator to update (``newer_schema_message``).
"""

from __future__ import annotations

import time

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.registry import SchemaEntry, SchemaRegistry, default_registry
from ctxbus.contract.schema_doc import SchemaDocumentError, parse_schema_document, schema_document, schema_key
from ctxbus.contract.serde import HEADER_EVENT_TYPE, HEADER_SCHEMA_VERSION, Headers, header_value

log = structlog.get_logger("ctxbus.schemas")

#: an unknown id is looked up on the topic at most this often
REFRESH_S = 10.0
READ_TIMEOUT_S = 5.0


def current_entries(registry: SchemaRegistry) -> list[SchemaEntry]:
    """The schema this code writes for each event type (and the dead-letter record)."""
    types = sorted({e.event_type for e in registry.entries()})
    return [registry.current(t) for t in types]


def announcements(registry: SchemaRegistry | None = None) -> list[tuple[bytes, bytes]]:
    """(key, value) records that publish the current schemas."""
    reg = registry or default_registry()
    return [(schema_key(e.schema_id), schema_document(e)) for e in current_entries(reg)]


def newer_schema_message(schema_id: int, headers: Headers | None, registry: SchemaRegistry) -> str:
    """What the operator should know about a record this ctxbus cannot read."""
    event_type = header_value(headers, HEADER_EVENT_TYPE)
    version = header_value(headers, HEADER_SCHEMA_VERSION)
    if event_type and registry.knows(event_type):
        known = registry.current(event_type).version
        return (
            f"schema id {schema_id} ({event_type} version {version or '?'}) was written by a newer ctxbus than this "
            f"one (it reads {event_type} up to version {known}) and was not found on the schemas topic: update "
            "ctxbus (or let the newer producer announce its schemas); the record is dead-lettered and can be "
            "replayed after the update"
        )
    return f"unknown schema id {schema_id}: not a ctxbus event this version knows (event type {event_type or '?'})"


class SchemaTopicReader:
    """Learns schema ids from the schemas topic into ``registry`` (the process's default one)."""

    def __init__(
        self,
        config: KafkaClientConfig,
        topic: str,
        registry: SchemaRegistry | None = None,
        *,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self._config, self._topic = config, topic
        self.registry = registry or default_registry()
        self._refresh_s = refresh_s
        self._tried: dict[int, float] = {}

    async def resolve(self, schema_id: int) -> bool:
        """Whether ``schema_id`` is known now (reading the topic if it was not, and not tried lately)."""
        if self.registry.has_id(schema_id):
            return True
        last = self._tried.get(schema_id)
        now = time.monotonic()
        if last is not None and now - last < self._refresh_s:
            return False
        self._tried[schema_id] = now
        try:
            await self.learn()
        except (KafkaError, OSError) as exc:
            log.warning("schemas_topic_unreadable", topic=self._topic, error=repr(exc))
            return False
        return self.registry.has_id(schema_id)

    async def learn(self) -> int:
        """Read the topic to its end; returns how many new ids were learned."""
        consumer = AIOKafkaConsumer(**self._config.consumer("schemas", None))
        await consumer.start()
        learned = 0
        try:
            partitions = consumer.partitions_for_topic(self._topic) or set()
            if not partitions:
                await consumer.topics()
                partitions = consumer.partitions_for_topic(self._topic) or set()
            tps = [TopicPartition(self._topic, p) for p in sorted(partitions)]
            if not tps:
                return 0
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            deadline = time.monotonic() + READ_TIMEOUT_S
            remaining = {tp for tp in tps if ends[tp] > 0}
            while remaining and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    for record in records:
                        learned += self._learn_one(record.value)
                    if records and records[-1].offset + 1 >= ends[tp]:
                        remaining.discard(tp)
                if not batch:
                    for tp in list(remaining):
                        if await consumer.position(tp) >= ends[tp]:
                            remaining.discard(tp)
        finally:
            await consumer.stop()
        if learned:
            log.info("schemas_learned", topic=self._topic, new_ids=learned)
        return learned

    def _learn_one(self, value: bytes | None) -> int:
        try:
            entry = parse_schema_document(value)
        except SchemaDocumentError as exc:
            log.warning("schema_document_skipped", error=str(exc))
            return 0
        return 1 if self.registry.learn(entry) else 0
