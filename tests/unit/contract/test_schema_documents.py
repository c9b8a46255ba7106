"""Schema documents (the schemas topic's records): a reader learns a newer producer's schema id and reads it."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import fastavro
import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.contract.registry import SchemaRegistry
from ctxbus.contract.schema_doc import SchemaDocumentError, parse_schema_document, schema_document
from ctxbus.contract.serde import EventDeserializer, UnknownSchemaId, frame, to_record

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"


def test_every_current_schema_round_trips_through_its_document() -> None:
    registry = SchemaRegistry(SCHEMAS)
    for entry in registry.entries():
        back = parse_schema_document(schema_document(entry))
        assert (back.schema_id, back.event_type, back.version) == (entry.schema_id, entry.event_type, entry.version)
        assert fastavro.schema.to_parsing_canonical_form(back.schema) == fastavro.schema.to_parsing_canonical_form(
            entry.schema
        )


def _newer_producer(tmp_path: Path) -> SchemaRegistry:
    """A producer one version ahead: the request payload gained an optional field, under a new id."""
    target = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, target)
    path = target / "ctxbus.payloads.RetrievalRequested.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append({"name": "urgency", "type": ["null", "string"], "default": None})
    path.write_text(json.dumps(schema))
    index = json.loads((target / "registry.json").read_text())
    current = max(r["version"] for r in index["schemas"] if r["event_type"] == "context.retrieval.requested")
    index["schemas"].append(
        {
            "id": 900,
            "event_type": "context.retrieval.requested",
            "version": current + 1,
            "file": "ctxbus.events.RetrievalRequested.avsc",
        }
    )
    (target / "registry.json").write_text(json.dumps(index))
    return SchemaRegistry(target)


def test_a_reader_that_learns_a_newer_id_reads_its_records(
    tmp_path: Path, request_event: Envelope[RetrievalRequested]
) -> None:
    newer = _newer_producer(tmp_path)
    entry = newer.by_id(900)
    record = to_record(request_event)
    record["payload"]["urgency"] = "high"
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, entry.schema, record)
    data = frame(900, buf.getvalue())

    ours = SchemaRegistry(SCHEMAS)
    with pytest.raises(UnknownSchemaId):
        EventDeserializer(ours)(data)
    assert ours.knows("context.retrieval.requested")
    assert ours.learn(parse_schema_document(schema_document(entry)))
    assert not ours.learn(parse_schema_document(schema_document(entry)))  # known ids are never replaced
    assert EventDeserializer(ours)(data) == request_event
    assert ours.current("context.retrieval.requested").schema_id != 900  # what we write is unchanged


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": 1}',
        b'{"format": 1, "id": 1, "version": 1, "event_type": "x", "schema": 5}',
    ],
)
def test_a_bad_document_is_refused_with_a_reason(value: bytes) -> None:
    with pytest.raises(SchemaDocumentError):
        parse_schema_document(value)
