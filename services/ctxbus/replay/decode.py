"""Raw records -> compact facts, with ``schemas/`` alone: no Kafka, no pydantic per event.

Every value is Confluent-framed Avro (``ctxbus.contract.serde``): the schema id picks the writer
schema from ``schemas/registry.json`` (old versions under ``schemas/archive/``), so versions are read
side by side, each with its own writer schema; fields an older version lacks take their defaults
here. For speed the parsed schemas are cached per schema id with their logical types removed (ids
stay strings, times stay integer microseconds: nothing is converted that the report does not need),
and the heavy completed events are read through a projection that skips what the report never uses
(item contents, score breakdowns, fingerprint components).

What cannot be decoded is skipped and counted by reason (``SKIP_REASONS``): a tombstone, foreign
bytes (bad framing), an unknown schema id, a body that does not match its schema, an event of a type
that does not belong on its topic, an envelope that contradicts its schema id, or a record on the
dead-letter topic without the dead-letter headers.
"""

from __future__ import annotations

import io
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from ctxbus.contract.registry import SchemaRegistry, UnknownSchema, default_registry
from ctxbus.contract.serde import DEAD_LETTER_TYPE, HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, MAGIC_BYTE
from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.replay.facts import (
    COMPLETED,
    INJECTED,
    OUTCOME,
    REQUESTED,
    CompletedFact,
    DeadLetterFact,
    DecodeStats,
    Fact,
    InjectedFact,
    OutcomeFact,
    RawRecord,
    RequestedFact,
)

#: Plain dead-letter headers are ``ctxbus-dlq-<field>`` (as written by ``adapters.kafka.dead_letter``).
DLQ_HEADER_PREFIX = HEADER_DLQ_PREFIX

_FRAME = struct.Struct(">bI")

#: Payload fields the report reads from a completed event; the rest is skipped by the Avro reader.
COMPLETED_PROJECTION: dict[str, Any] = {
    "request": {
        "agent_name": True,
        "agent_role": True,
        "domain": True,
        "task_type": True,
        "trigger": True,
        "task_id": True,
    },
    "request_emitted_at": True,
    "items": {"id": True, "project": True},
    "candidates_considered": True,
    "retrieval_duration_ms": True,
    "empty_reason": True,
    "profile": True,
    "task_type": True,
    "fingerprint": True,
}
#: event type -> projection of its payload (absent: the whole payload is read, which is faster for small events)
PROJECTIONS: dict[str, dict[str, Any]] = {COMPLETED: COMPLETED_PROJECTION}


class _Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def strip_logical_types(schema: Any) -> Any:
    """The schema without ``logicalType`` annotations: uuids stay strings, timestamps integers."""
    if isinstance(schema, dict):
        return {k: strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    return schema


def project_schema(schema: Any, spec: Any) -> Any:
    """A reader schema keeping only the fields named in ``spec`` (nested dicts; True keeps a field whole).

    Record names stay the writer's, so Avro resolution reads the writer's bytes and skips the rest.
    Spec fields the writer lacks are left out (the fact takes the default).
    """
    if spec is True:
        return schema
    if isinstance(schema, list):
        return [project_schema(s, spec) if isinstance(s, dict) else s for s in schema]
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            fields = [
                {**f, "type": project_schema(f["type"], spec[f["name"]])} for f in schema["fields"] if f["name"] in spec
            ]
            return {**schema, "fields": fields}
        if kind == "array":
            return {**schema, "items": project_schema(schema["items"], spec)}
        if kind == "map":
            return {**schema, "values": project_schema(schema["values"], spec)}
        if isinstance(kind, dict | list):
            return {**schema, "type": project_schema(kind, spec)}
    return schema


@dataclass(frozen=True, slots=True)
class _Schema:
    schema_id: int
    event_type: str
    version: int
    writer: Any
    reader: Any
    #: the record with only its first field (the envelope): reading stops after it
    envelope_prefix: Any


def _parse(schema_id: int, registry: SchemaRegistry) -> _Schema:
    entry = registry.by_id(schema_id)
    writer = strip_logical_types(entry.schema)
    spec = PROJECTIONS.get(entry.event_type)
    reader = None
    if spec is not None and writer.get("type") == "record":
        reader = fastavro.parse_schema(project_schema(writer, {"envelope": True, "payload": spec}))
    prefix = None
    fields = writer.get("fields") or []
    if fields and fields[0].get("name") == "envelope":
        prefix = fastavro.parse_schema({"type": "record", "name": writer["name"], "fields": [fields[0]]})
    return _Schema(schema_id, entry.event_type, entry.version, fastavro.parse_schema(writer), reader, prefix)


def _get(d: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = d.get(key, default)
    return default if value is None and default is not None else value


def _items(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(i["id"] for i in payload.get("items") or ())


def _global_items(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(i["id"] for i in payload.get("items") or () if i.get("project") == GLOBAL_PROJECT)


def requested_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> RequestedFact:
    return RequestedFact(
        env["event_id"],
        env["correlation_id"],
        env["session_id"],
        env["project"],
        env["emitted_at"],
        schema_id,
        p["agent_name"],
        _get(p, "agent_role", "implementer"),
        p["trigger"],
        p.get("task_type"),
        p.get("task_id"),
        p.get("domain"),
        _get(p, "max_tokens", 2_000),
        _get(p, "max_items", 10),
    )


def completed_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> CompletedFact:
    req = p.get("request") or {}
    return CompletedFact(
        env["event_id"],
        env["correlation_id"],
        env["session_id"],
        env["project"],
        env["emitted_at"],
        schema_id,
        p["request_emitted_at"],
        req.get("agent_name", ""),
        _get(req, "agent_role", "implementer"),
        req.get("trigger", ""),
        req.get("task_id"),
        req.get("domain"),
        _get(p, "profile", "implementer"),
        p.get("task_type"),
        p.get("fingerprint"),
        _get(p, "candidates_considered", 0),
        float(_get(p, "retrieval_duration_ms", 0.0)),
        p.get("empty_reason"),
        _items(p),
        _global_items(p),
    )


def injected_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> InjectedFact:
    return InjectedFact(
        env["event_id"],
        env["correlation_id"],
        env["session_id"],
        env["project"],
        env["emitted_at"],
        schema_id,
        p.get("request_emitted_at"),
        p["agent_name"],
        _get(p, "agent_role", "implementer"),
        p["trigger"],
        p["context_source"],
        tuple(p.get("item_ids") or ()),
        p["token_estimate"],
        p["context_chars"],
        p["context_size_bytes"],
        bool(p.get("truncated")),
        p.get("empty_reason"),
        float(_get(p, "assembly_duration_ms", 0.0)),
        float(p["retrieval_duration_ms"]),
        p.get("task_id"),
        tuple(p.get("global_item_ids") or ()),
        p.get("fingerprint"),
    )


def outcome_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> OutcomeFact:
    return OutcomeFact(
        env["event_id"],
        env["correlation_id"],
        env["session_id"],
        env["project"],
        env["emitted_at"],
        schema_id,
        _get(p, "scope", "session"),
        p.get("task_id"),
        _get(p, "outcome", "unknown"),
        p["source"],
    )


_FACTS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], int], Fact]] = {
    REQUESTED: requested_fact,
    COMPLETED: completed_fact,
    INJECTED: injected_fact,
    OUTCOME: outcome_fact,
}


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
        self._schemas: dict[int, _Schema | None] = {}

    def _schema(self, schema_id: int) -> _Schema:
        try:
            cached = self._schemas[schema_id]
        except KeyError:
            try:
                cached = _parse(schema_id, self._registry)
            except UnknownSchema:
                cached = None
            self._schemas[schema_id] = cached
        if cached is None:
            raise _Skip("unknown_schema_id")
        return cached

    def _frame(self, value: bytes | None) -> tuple[_Schema, io.BytesIO]:
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

    def _read(self, value: bytes | None) -> tuple[_Schema, dict[str, Any]]:
        schema, buf = self._frame(value)
        try:
            record = fastavro.schemaless_reader(buf, schema.writer, schema.reader)
        except Exception as exc:  # fastavro raises many types for corrupt bodies
            raise _Skip("undecodable") from exc
        if not isinstance(record, dict) or buf.tell() != len(value or b""):
            raise _Skip("undecodable")
        return schema, record

    def _prefix(self, schema: _Schema, buf: io.BytesIO) -> dict[str, Any]:
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
        make = _FACTS.get(schema.event_type)
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
