"""Pure serde callables: envelope <-> Confluent-framed Avro bytes, plus Kafka headers.

Wire format: magic byte 0, 4-byte big-endian schema id (from schemas/registry.json),
then the Avro binary body of the schema with that id. Decoding resolves the
writer's schema (by id) against the reader's current schema for that event type,
so old and new versions are read side by side.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro
from pydantic import ValidationError

from ctxbus.contract.envelope import PAYLOAD_TYPES, AnyEnvelope, Envelope
from ctxbus.contract.payloads import DeadLetter
from ctxbus.contract.registry import SchemaRegistry, UnknownSchema, default_registry

MAGIC_BYTE = 0
_FRAME = struct.Struct(">bI")
#: Largest event accepted, in bytes (larger ones are poison, not processed): Kafka's default record
#: limit, the most a ctxbus producer sends (CTXBUS_KAFKA_MAX_RECORD_BYTES), so whatever it sends is read.
DEFAULT_MAX_EVENT_BYTES = 1_048_576
DEAD_LETTER_TYPE = "deadletter"

HEADER_EVENT_TYPE = "ctxbus-event-type"
HEADER_EVENT_ID = "ctxbus-event-id"
HEADER_CORRELATION_ID = "ctxbus-correlation-id"
HEADER_CAUSATION_ID = "ctxbus-causation-id"
HEADER_SCHEMA_VERSION = "ctxbus-schema-version"
HEADER_SCHEMA_ID = "ctxbus-schema-id"
HEADER_DEAD_LETTER = "ctxbus-dead-letter"
#: the plain dead-letter headers are ``ctxbus-dlq-<field>`` (original topic, partition, offset, error ...)
HEADER_DLQ_PREFIX = "ctxbus-dlq-"

Headers = list[tuple[str, bytes]]


class EventDecodeError(ValueError):
    """Bytes that are not a valid ctxbus event; ``reason`` is a short stable slug."""

    reason = "undecodable"


class UnknownSchemaId(EventDecodeError):
    reason = "unknown_schema_id"


class InvalidEvent(EventDecodeError):
    reason = "validation_failed"


class OversizeEvent(EventDecodeError):
    reason = "oversize"


class UnexpectedEventType(EventDecodeError):
    reason = "unexpected_event_type"


def frame(schema_id: int, body: bytes) -> bytes:
    return _FRAME.pack(MAGIC_BYTE, schema_id) + body


def unframe(data: bytes) -> tuple[int, bytes]:
    if len(data) < _FRAME.size:
        raise EventDecodeError(f"{len(data)} bytes is shorter than the 5-byte Confluent frame")
    magic, schema_id = _FRAME.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise EventDecodeError(f"magic byte is {magic}, expected {MAGIC_BYTE}")
    return schema_id, data[_FRAME.size :]


def _avro_write(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


def _avro_read(writer: dict[str, Any], reader: dict[str, Any], body: bytes) -> dict[str, Any]:
    buf = io.BytesIO(body)
    record = fastavro.schemaless_reader(buf, writer, reader)
    if not isinstance(record, dict):
        raise EventDecodeError("the Avro body is not a record")
    if buf.tell() != len(body):
        raise EventDecodeError(f"{len(body) - buf.tell()} trailing bytes after the Avro record")
    return record


#: a filter over a payload record's strings, in place (the publisher's: ctxbus.redact.default.redact_strings)
Scrub = Callable[[dict[str, Any]], object]


def to_record(event: AnyEnvelope, scrub: Scrub | None = None) -> dict[str, Any]:
    """The Avro record of an event: ``{"envelope": {...}, "payload": {...}}``; ``scrub`` rewrites the payload's
    strings first (the envelope holds ids, the project and the session, never user text)."""
    envelope = event.model_dump(mode="python", exclude={"payload"})
    payload = event.payload.model_dump(mode="python")
    if scrub is not None:
        scrub(payload)
    return {"envelope": envelope, "payload": payload}


def from_record(record: dict[str, Any]) -> AnyEnvelope:
    envelope = record["envelope"]
    payload_type = PAYLOAD_TYPES.get(envelope["event_type"])
    if payload_type is None:
        raise UnexpectedEventType(f"unknown event type {envelope['event_type']!r}")
    try:
        return Envelope[payload_type].model_validate({**envelope, "payload": record["payload"]})  # type: ignore[valid-type]
    except ValidationError as exc:
        raise InvalidEvent(_validation_summary(exc)) from exc


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


class EventSerializer:
    """``serialize(event) -> bytes`` with the current schema of the event's type."""

    def __init__(self, registry: SchemaRegistry | None = None, *, scrub: Scrub | None = None) -> None:
        self._registry = registry or default_registry()
        self._scrub = scrub

    def __call__(self, event: AnyEnvelope) -> bytes:
        entry = self._registry.current(event.event_type)
        return frame(entry.schema_id, _avro_write(entry.schema, to_record(event, self._scrub)))

    def schema_id(self, event_type: str) -> int:
        return self._registry.current(event_type).schema_id


class EventDeserializer:
    """``deserialize(bytes) -> envelope``; raises an :class:`EventDecodeError` for poison."""

    def __init__(self, registry: SchemaRegistry | None = None, *, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._registry = registry or default_registry()
        self._max_bytes = max_bytes

    def __call__(self, data: bytes | None, *, expect: str | None = None) -> AnyEnvelope:
        if data is None:
            raise EventDecodeError("the message has no value (tombstone)")
        if len(data) > self._max_bytes:
            raise OversizeEvent(f"event is {len(data)} bytes, the limit is {self._max_bytes}")
        schema_id, body = unframe(data)
        try:
            writer = self._registry.by_id(schema_id)
            reader = self._registry.current(writer.event_type)
        except UnknownSchema as exc:
            raise UnknownSchemaId(str(exc)) from exc
        if expect is not None and writer.event_type != expect:
            raise UnexpectedEventType(f"got a {writer.event_type!r} event where {expect!r} was expected")
        try:
            record = _avro_read(writer.schema, reader.schema, body)
        except EventDecodeError:
            raise
        except Exception as exc:  # fastavro raises many types for corrupt bodies
            raise EventDecodeError(f"Avro body does not match schema id {schema_id}: {exc!r}") from exc
        event = from_record(record)
        if event.event_type != writer.event_type:
            raise InvalidEvent(f"envelope says {event.event_type!r} but schema id {schema_id} is {writer.event_type!r}")
        return event


def event_headers(event: AnyEnvelope, schema_id: int) -> Headers:
    """Kafka headers mirroring the envelope's routing facts."""
    return [
        (HEADER_EVENT_TYPE, event.event_type.encode()),
        (HEADER_EVENT_ID, str(event.event_id).encode()),
        (HEADER_CORRELATION_ID, str(event.correlation_id).encode()),
        (HEADER_CAUSATION_ID, str(event.causation_id).encode()),
        (HEADER_SCHEMA_VERSION, str(event.schema_version).encode()),
        (HEADER_SCHEMA_ID, str(schema_id).encode()),
    ]


def encode_dead_letter(record: DeadLetter, registry: SchemaRegistry | None = None) -> bytes:
    entry = (registry or default_registry()).current(DEAD_LETTER_TYPE)
    return frame(entry.schema_id, _avro_write(entry.schema, record.model_dump(mode="python")))


def decode_dead_letter(data: bytes, registry: SchemaRegistry | None = None) -> DeadLetter:
    reg = registry or default_registry()
    schema_id, body = unframe(data)
    writer = reg.by_id(schema_id)
    reader = reg.current(DEAD_LETTER_TYPE)
    return _model(DeadLetter, _avro_read(writer.schema, reader.schema, body))


def _model(model: type[DeadLetter], record: dict[str, Any]) -> DeadLetter:
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        raise InvalidEvent(_validation_summary(exc)) from exc


def header_value(headers: Headers | None, name: str) -> str | None:
    for key, value in headers or ():
        if key == name:
            return value.decode("utf-8", "replace")
    return None
