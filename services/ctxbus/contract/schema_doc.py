"""Schemas as records on a topic: what producers publish so readers with older ``schemas/`` can decode them.

Every ctxbus producer writes the schemas it writes with to the compacted ``PREFIX.schemas`` topic, one
record per schema id (key: the id in decimal; value: this module's JSON document with the id, event
type, version and the schema with every named type inlined). A reader that meets a schema id its own
``schemas/`` does not list (a newer producer) looks it up there and reads the record with it as the
writer's schema, resolved against its own current version: the compatibility rule makes that work.
Pure: bytes in, bytes out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro

from ctxbus.contract.registry import SchemaEntry

#: the version of this document's layout
DOCUMENT_FORMAT = 1
#: where a learned entry says it came from (it has no file)
LEARNED_FROM = "schemas-topic"


class SchemaDocumentError(ValueError):
    """A record on the schemas topic that is not a schema document this ctxbus can use."""


def _portable(node: Any) -> Any:
    """The schema without fastavro's bookkeeping keys (``__fastavro_parsed``, ``__named_schemas``)."""
    if isinstance(node, dict):
        return {k: _portable(v) for k, v in node.items() if not k.startswith("__")}
    if isinstance(node, list):
        return [_portable(v) for v in node]
    return node


def schema_key(schema_id: int) -> bytes:
    return str(schema_id).encode()


def schema_document(entry: SchemaEntry) -> bytes:
    """The record value that publishes ``entry``."""
    doc = {
        "format": DOCUMENT_FORMAT,
        "id": entry.schema_id,
        "event_type": entry.event_type,
        "version": entry.version,
        "schema": _portable(entry.schema),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def parse_schema_document(value: bytes | None) -> SchemaEntry:
    """The entry a schema document describes; raises SchemaDocumentError for anything else."""
    if not value:
        raise SchemaDocumentError("empty schema document")
    try:
        doc = json.loads(value)
    except ValueError as exc:
        raise SchemaDocumentError(f"schema document is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != DOCUMENT_FORMAT:
        raise SchemaDocumentError(f"not a format-{DOCUMENT_FORMAT} schema document")
    schema_id, event_type, version = doc.get("id"), doc.get("event_type"), doc.get("version")
    if not isinstance(schema_id, int) or not isinstance(version, int) or not isinstance(event_type, str):
        raise SchemaDocumentError("a schema document needs an integer id and version and a string event_type")
    schema = doc.get("schema")
    if not isinstance(schema, dict):
        raise SchemaDocumentError(f"schema id {schema_id} is not a named record schema")
    try:
        parsed = fastavro.parse_schema(schema)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise SchemaDocumentError(f"schema id {schema_id} does not parse: {exc}") from exc
    if not isinstance(parsed, dict):
        raise SchemaDocumentError(f"schema id {schema_id} is not a named record schema")
    return SchemaEntry(
        schema_id=schema_id,
        event_type=event_type,
        version=version,
        path=Path(LEARNED_FROM) / str(schema_id),
        schema=parsed,
    )
