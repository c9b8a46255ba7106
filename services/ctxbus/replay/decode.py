"""Raw records -> compact facts, with ``schemas/`` alone: no Kafka, no pydantic per event.

Every value is Confluent-framed Avro (``ctxbus.contract.serde``): the schema id picks the writer
schema from ``schemas/registry.json`` (old versions under ``schemas/archive/``), so versions are read
side by side, each with its own writer schema; fields an older version lacks take their defaults
(``replay.event_facts``). For speed the parsed schemas are cached per schema id with their logical
types removed (ids stay strings, times stay integer microseconds: nothing is converted that the report
does not need), and the heavy completed events are read through a projection that skips what the
report never uses (item contents, score breakdowns, fingerprint components; ``replay.reader_schemas``).

What cannot be decoded is skipped and counted by reason (``SKIP_REASONS``): a tombstone, foreign
bytes (bad framing), an unknown schema id, a body that does not match its schema, an event of a type
that does not belong on its topic, an envelope that contradicts its schema id, or a record on the
dead-letter topic without the dead-letter headers.
"""

from __future__ import annotations

import io
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import fastavro

from ctxbus.contract.registry import SchemaRegistry, UnknownSchema, default_registry
from ctxbus.contract.serde import DEAD_LETTER_TYPE, HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, MAGIC_BYTE
from ctxbus.replay.event_facts import FACTS
from ctxbus.replay.facts import DeadLetterFact, DecodeStats, Fact, RawRecord
from ctxbus.replay.reader_schemas import ParsedSchema, parse_schema_id

#: Plain dead-letter headers are ``ctxbus-dlq-<field>`` (as written by ``adapters.kafka.dead_letter``).
DLQ_HEADER_PREFIX = HEADER_DLQ_PREFIX

_FRAME = struct.Struct(">bI")


class _Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reason_of(message: str) -> str:
    """The runner writes ``"<reason>: <error>"``; the reason is the slug before the first colon."""
    head, sep, _ = message.partition(":")
    return head.strip() if sep and head.strip() and " " not in head.strip() else "unknown"


class Decoder:
    """Decodes raw records of the given topics into facts; parsed schemas are cached per schema id.

    ``topic_types`` maps each topic to the event type that belongs on it (None: any ctxbus event,
    counted but not turned into a fact); ``dead_letter_topic`` is read as dead letters.
    """

    def __init__(
        self,
        topic_types: Mapping[str, str | None],
        dead_letter_topic: str,
        registry: SchemaRegistry | None = None,
    ) -> None:
        self._topic_types = dict(topic_types)
        self._dlq = dead_letter_topic
        self._registry = registry or default_registry()
        self._schemas: dict[int, ParsedSchema | None] = {}

    def _schema(self, schema_id: int) -> ParsedSchema:
        try:
            cached = self._schemas[schema_id]
        except KeyError:
            try:
                cached = parse_schema_id(schema_id, self._registry)
            except UnknownSchema:
                cached = None
            self._schemas[schema_id] = cached
        if cached is None:
            raise _Skip("unknown_schema_id")
        return cached

    def _frame(self, value: bytes | None) -> tuple[ParsedSchema, io.BytesIO]:
        if value is None:
            raise _Skip("tombstone")
        if len(value) < _FRAME.size:
            raise _Skip("bad_framing")
        magic, schema_id = _FRAME.unpack_from(value)
        if magic != MAGIC_BYTE:
            raise _Skip("bad_framing")
        buf = io.BytesIO(value)
        buf.seek(_FRAME.size)
        return self._schema(schema_id), buf

    def _read(self, value: bytes | None) -> tuple[ParsedSchema, dict[str, Any]]:
        schema, buf = self._frame(value)
        try:
            record = fastavro.schemaless_reader(buf, schema.writer, schema.reader)
        except Exception as exc:  # fastavro raises many types for corrupt bodies
            raise _Skip("undecodable") from exc
        if not isinstance(record, dict) or buf.tell() != len(value or b""):
            raise _Skip("undecodable")
        return schema, record

    def _prefix(self, schema: ParsedSchema, buf: io.BytesIO) -> dict[str, Any]:
        if schema.envelope_prefix is None:
            raise _Skip("undecodable")
        try:
            record = fastavro.schemaless_reader(buf, schema.envelope_prefix, None)
        except Exception as exc:
            raise _Skip("undecodable") from exc
        if not isinstance(record, dict) or not isinstance(record.get("envelope"), dict):
            raise _Skip("undecodable")
        envelope: dict[str, Any] = record["envelope"]
        return envelope

    def envelope(self, value: bytes | None) -> tuple[str, dict[str, Any]] | None:
        """The event type and envelope of a ctxbus event (the payload is not read), else None."""
        try:
            schema, buf = self._frame(value)
            return schema.event_type, self._prefix(schema, buf)
        except _Skip:
            return None

    def _event(self, rec: RawRecord, versions: Counter[tuple[str, int]]) -> Fact | None:
        expected = self._topic_types.get(rec.topic)
        schema, buf = self._frame(rec.value)
        if expected is not None and schema.event_type != expected:
            raise _Skip("unexpected_event_type")
        make = FACTS.get(schema.event_type)
        env: Any
        payload: Any = None
        if make is None:  # an event the report only counts (attempts, memory): its envelope is enough
            env = self._prefix(schema, buf)
        else:
            try:
                record = fastavro.schemaless_reader(buf, schema.writer, schema.reader)
            except Exception as exc:  # fastavro raises many types for corrupt bodies
                raise _Skip("undecodable") from exc
            if not isinstance(record, dict) or buf.tell() != len(rec.value or b""):
                raise _Skip("undecodable")
            env, payload = record.get("envelope"), record.get("payload")
            if not isinstance(env, dict) or not isinstance(payload, dict):
                raise _Skip("undecodable")
        if env.get("event_type") != schema.event_type:
            raise _Skip("envelope_mismatch")
        try:
            fact = make(env, payload, schema.schema_id) if make is not None else None
        except (KeyError, TypeError, ValueError) as exc:  # a schema without a field every version has had
            raise _Skip("undecodable") from exc
        versions[(schema.event_type, schema.version)] += 1
        return fact

    def _dead_letter(self, rec: RawRecord, versions: Counter[tuple[str, int]]) -> DeadLetterFact:
        headers = dict(rec.headers)
        info: dict[str, Any] | None = None
        framed = headers.get(HEADER_DEAD_LETTER)
        if framed is not None:
            try:
                schema, record = self._read(framed)
                if schema.event_type == DEAD_LETTER_TYPE:
                    info = record
                    versions[(DEAD_LETTER_TYPE, schema.version)] += 1
            except _Skip:
                info = None
        if info is None:
            plain = {
                k[len(DLQ_HEADER_PREFIX) :]: v.decode("utf-8", "replace")
                for k, v in headers.items()
                if k.startswith(DLQ_HEADER_PREFIX)
            }
            if "error-class" not in plain and "error-message" not in plain:
                raise _Skip("not_a_dead_letter")
            info = {
                "original_topic": plain.get("original-topic", ""),
                "original_partition": _int(plain.get("original-partition")),
                "original_offset": _int(plain.get("original-offset")),
                "consumer_group": plain.get("consumer-group", ""),
                "error_class": plain.get("error-class", ""),
                "error_message": plain.get("error-message", ""),
                "attempts": _int(plain.get("attempts"), 1),
            }
        original = self.envelope(rec.value)
        message = str(info.get("error_message") or "")
        return DeadLetterFact(
            rec.partition,
            rec.offset,
            rec.timestamp_ms,
            str(info.get("original_topic") or ""),
            _number(info.get("original_partition"), -1),
            _number(info.get("original_offset"), -1),
            str(info.get("consumer_group") or ""),
            str(info.get("error_class") or "unknown"),
            _reason_of(message),
            message,
            _number(info.get("attempts"), 1),
            original[0] if original else None,
            str(original[1].get("correlation_id")) if original else None,
        )

    def decode(self, records: Iterable[RawRecord]) -> tuple[list[Fact], DecodeStats]:
        stats = DecodeStats()
        versions = stats.versions
        facts: list[Fact] = []
        append = facts.append
        dlq = self._dlq
        for rec in records:
            stats.records += 1
            stats.by_topic[rec.topic] += 1
            try:
                fact = self._dead_letter(rec, versions) if rec.topic == dlq else self._event(rec, versions)
            except _Skip as skip:
                stats.skipped[(rec.topic, skip.reason)] += 1
                continue
            stats.decoded += 1
            if fact is not None:
                append(fact)
        return facts, stats


def _number(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _int(text: str | None, default: int = -1) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
