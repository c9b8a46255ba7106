"""Avro bodies of ``ctxbus bench replay``'s synthetic events, written with the current schemas as the services
write them, fast enough for millions of records (a completed event's ranked items are encoded once)."""

from __future__ import annotations

import io
from typing import Any

import fastavro

from ctxbus.contract.envelope import EventType
from ctxbus.contract.registry import SchemaRegistry
from ctxbus.contract.serde import (
    HEADER_CAUSATION_ID,
    HEADER_CORRELATION_ID,
    HEADER_EVENT_ID,
    HEADER_EVENT_TYPE,
    HEADER_SCHEMA_ID,
    HEADER_SCHEMA_VERSION,
    frame,
)
from ctxbus.replay.reader_schemas import strip_logical_types


def zigzag(n: int) -> bytes:
    """An Avro long (zigzag varint)."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode(schema: Any, record: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


class AvroWriter:
    """Avro bodies with the current schemas (logical types removed: ids as strings, times as microseconds,
    which is byte for byte what the services write). A completed event is written in three pieces (an
    Avro record is its fields one after the other): the envelope and request, the items array from the
    ranked items' bytes encoded once, then the remaining fields; the bytes are the same as one write."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._entries = {}
        for event_type in (
            EventType.RETRIEVAL_REQUESTED,
            EventType.RETRIEVAL_COMPLETED,
            EventType.CONTEXT_INJECTED,
            EventType.OUTCOME_RECORDED,
        ):
            entry = registry.current(event_type)
            self._entries[event_type] = (
                entry.schema_id,
                entry.version,
                fastavro.parse_schema(strip_logical_types(entry.schema)),
            )
        completed = strip_logical_types(registry.current(EventType.RETRIEVAL_COMPLETED).schema)
        envelope_field, payload_field = completed["fields"]
        fields = payload_field["type"]["fields"]
        names = [f["name"] for f in fields]
        at = names.index("items")
        named: dict[str, Any] = {}
        self._prefix = fastavro.parse_schema(
            {"type": "record", "name": "bench.CompletedPrefix", "fields": [envelope_field, *fields[:at]]},
            named_schemas=named,
        )
        self.item_schema = fastavro.parse_schema(fields[at]["type"]["items"], named_schemas=named)
        self._tail = fastavro.parse_schema(
            {"type": "record", "name": "bench.CompletedTail", "fields": fields[at + 1 :]}, named_schemas=named
        )
        self._before_items = names[:at]

    def _headers(self, envelope: dict[str, Any], schema_id: int, version: int) -> list[tuple[str, bytes]]:
        return [
            (HEADER_EVENT_TYPE, envelope["event_type"].encode()),
            (HEADER_EVENT_ID, envelope["event_id"].encode()),
            (HEADER_CORRELATION_ID, envelope["correlation_id"].encode()),
            (HEADER_CAUSATION_ID, envelope["causation_id"].encode()),
            (HEADER_SCHEMA_VERSION, str(version).encode()),
            (HEADER_SCHEMA_ID, str(schema_id).encode()),
        ]

    def __call__(self, envelope: dict[str, Any], payload: dict[str, Any]) -> tuple[bytes, list[tuple[str, bytes]]]:
        schema_id, version, schema = self._entries[envelope["event_type"]]
        envelope["schema_version"] = version
        body = encode(schema, {"envelope": envelope, "payload": payload})
        return frame(schema_id, body), self._headers(envelope, schema_id, version)

    def completed(
        self, envelope: dict[str, Any], payload: dict[str, Any], items: list[bytes]
    ) -> tuple[bytes, list[tuple[str, bytes]]]:
        """A completed event whose ``items`` are already encoded ranked items (``payload`` has no items)."""
        schema_id, version, _ = self._entries[EventType.RETRIEVAL_COMPLETED]
        envelope["schema_version"] = version
        prefix = encode(self._prefix, {"envelope": envelope, **{k: payload[k] for k in self._before_items}})
        array = (zigzag(len(items)) + b"".join(items) + b"\x00") if items else b"\x00"
        tail = encode(self._tail, payload)
        return frame(schema_id, prefix + array + tail), self._headers(envelope, schema_id, version)
