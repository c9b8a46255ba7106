"""The writer schemas ``replay.decode`` reads with, parsed once per schema id.

Logical types are removed (ids stay strings, times stay integer microseconds), and the heavy completed
events are read through a projection that skips what the report never uses (item contents, score
breakdowns, fingerprint components).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fastavro

from ctxbus.contract.registry import SchemaRegistry
from ctxbus.replay.facts import COMPLETED

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
class ParsedSchema:
    schema_id: int
    event_type: str
    version: int
    writer: Any
    reader: Any
    #: the record with only its first field (the envelope): reading stops after it
    envelope_prefix: Any


def parse_schema_id(schema_id: int, registry: SchemaRegistry) -> ParsedSchema:
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
    return ParsedSchema(schema_id, entry.event_type, entry.version, fastavro.parse_schema(writer), reader, prefix)
