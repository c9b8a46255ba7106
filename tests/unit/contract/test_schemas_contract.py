"""schemas/ is the contract: decodable with fastavro alone, mirrored by the models, evolvable."""

from __future__ import annotations

import io
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import fastavro
import fastavro.schema
import pytest
from pydantic import BaseModel

from ctxbus.contract import payloads
from ctxbus.contract.envelope import CURRENT_SCHEMA_VERSION, AnyEnvelope, Envelope
from ctxbus.contract.payloads import CurationAction, RetrievalRequested
from ctxbus.contract.registry import SchemaRegistry
from ctxbus.contract.serde import EventDeserializer, EventSerializer
from ctxbus.memory.model import MemoryItem

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"


def _decode_with_fastavro_only(data: bytes) -> dict[str, Any]:
    """What an analyst does with nothing but schemas/ and fastavro."""
    index = json.loads((SCHEMAS / "registry.json").read_text())
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert magic == 0
    row = next(r for r in index["schemas"] if r["id"] == schema_id)
    schema = fastavro.schema.load_schema(str(SCHEMAS / row["file"]))
    record: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(data[5:]), schema, schema)
    return record


@pytest.mark.parametrize(
    "name", ["request_event", "completed_event", "injected_event", "stored_event", "curated_event"]
)
def test_schemas_dir_alone_decodes_every_event(name: str, request: pytest.FixtureRequest) -> None:
    event: AnyEnvelope = request.getfixturevalue(name)
    record = _decode_with_fastavro_only(EventSerializer()(event))
    assert record["envelope"]["event_id"] == event.event_id
    assert record["envelope"]["correlation_id"] == event.correlation_id
    assert record["envelope"]["event_type"] == event.event_type
    assert set(record["payload"]) == set(type(event.payload).model_fields)
    assert type(event.payload).model_validate(record["payload"]) == event.payload


def test_registry_lists_every_schema_file_and_current_versions_match_the_code() -> None:
    registry = SchemaRegistry(SCHEMAS)
    ids = [e.schema_id for e in registry.entries()]
    assert len(ids) == len(set(ids))
    for event_type, version in CURRENT_SCHEMA_VERSION.items():
        assert registry.current(event_type).version == version


def _avro_fields(fullname: str) -> set[str]:
    schema = json.loads((SCHEMAS / f"{fullname}.avsc").read_text())
    return {f["name"] for f in schema["fields"]}


@pytest.mark.parametrize(
    ("model", "fullname"),
    [
        (payloads.RetrievalRequested, "ctxbus.payloads.RetrievalRequested"),
        (payloads.RetrievalCompleted, "ctxbus.payloads.RetrievalCompleted"),
        (payloads.RankedItem, "ctxbus.payloads.RankedItem"),
        (payloads.ContextInjected, "ctxbus.payloads.ContextInjected"),
        (payloads.DeadLetter, "ctxbus.DeadLetter"),
        (payloads.OutcomeRecorded, "ctxbus.payloads.OutcomeRecorded"),
        (payloads.AttemptRecorded, "ctxbus.payloads.AttemptRecorded"),
        (payloads.MemoryUpserted, "ctxbus.payloads.MemoryUpserted"),
        (payloads.MemoryStored, "ctxbus.payloads.MemoryStored"),
        (payloads.MemoryCurated, "ctxbus.payloads.MemoryCurated"),
        (MemoryItem, "ctxbus.payloads.MemoryRecord"),
    ],
)
def test_models_mirror_the_avro_records(model: type[BaseModel], fullname: str) -> None:
    # an item's feedback (learned from outcomes), cluster (assigned by ingestion) and pin (a person's, through
    # memory.curated) are the store's, never sent:
    # producers cannot forge them
    local_only = {"feedback", "cluster_id", "pinned"} if model is MemoryItem else set()
    assert set(model.model_fields) - local_only == _avro_fields(fullname)


def test_memory_store_results_mirror_their_nested_record_and_enum() -> None:
    schema = json.loads((SCHEMAS / "ctxbus.payloads.MemoryStored.avsc").read_text())
    result = schema["fields"][0]["type"]["items"]
    assert {f["name"] for f in result["fields"]} == set(payloads.MemoryStoreResult.model_fields)
    action = next(f["type"] for f in result["fields"] if f["name"] == "action")
    assert [m.value for m in payloads.MemoryAction] == action["symbols"]
    assert action["default"] in action["symbols"]


def test_the_curation_action_mirrors_its_avro_enum() -> None:
    schema = json.loads((SCHEMAS / "ctxbus.payloads.MemoryCurated.avsc").read_text())
    action = next(f["type"] for f in schema["fields"] if f["name"] == "action")
    assert [m.value for m in CurationAction] == action["symbols"] and action["default"] in action["symbols"]


def test_envelope_model_mirrors_the_avro_envelope() -> None:
    assert set(Envelope.model_fields) - {"payload"} == _avro_fields("ctxbus.Envelope")


@pytest.mark.parametrize(
    ("model", "fullname"),
    [
        (payloads.Trigger, "ctxbus.payloads.Trigger"),
        (payloads.TaskType, "ctxbus.payloads.TaskType"),
        (payloads.ContextSource, "ctxbus.payloads.ContextSource"),
    ],
)
def test_enums_mirror_the_avro_enums(model: type, fullname: str) -> None:
    schema = json.loads((SCHEMAS / f"{fullname}.avsc").read_text())
    assert [m.value for m in model] == schema["symbols"]  # type: ignore[attr-defined]


def _evolved_schemas(tmp_path: Path) -> Path:
    """A copy of schemas/ where the request payload gained an optional field (the compatibility rule)."""
    target = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, target)
    path = target / "ctxbus.payloads.RetrievalRequested.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append({"name": "urgency", "type": ["null", "string"], "default": None})
    path.write_text(json.dumps(schema))
    return target


def _write(schema_file: Path, record: dict[str, Any]) -> bytes:
    schema = fastavro.schema.load_schema(str(schema_file))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


def test_todays_event_is_read_by_a_reader_with_an_added_field(
    tmp_path: Path, request_event: Envelope[RetrievalRequested]
) -> None:
    data = EventSerializer()(request_event)
    new_schema = fastavro.schema.load_schema(str(_evolved_schemas(tmp_path) / "ctxbus.events.RetrievalRequested.avsc"))
    old_schema = SchemaRegistry(SCHEMAS).current(request_event.event_type).schema
    record = fastavro.schemaless_reader(io.BytesIO(data[5:]), old_schema, new_schema)
    assert record["payload"]["urgency"] is None
    assert record["payload"]["prompt"] == request_event.payload.prompt


def test_an_event_with_an_added_field_is_read_by_todays_reader(
    tmp_path: Path, request_event: Envelope[RetrievalRequested]
) -> None:
    evolved = _evolved_schemas(tmp_path)
    from ctxbus.contract.serde import frame, to_record

    record = to_record(request_event)
    record["payload"]["urgency"] = "high"
    body = _write(evolved / "ctxbus.events.RetrievalRequested.avsc", record)
    # register the evolved schema as version 2 under a new id, as the compatibility rule says
    index = json.loads((evolved / "registry.json").read_text())
    new_id = max(r["id"] for r in index["schemas"]) + 1
    index["schemas"].append(
        {
            "id": new_id,
            "event_type": "context.retrieval.requested",
            "version": CURRENT_SCHEMA_VERSION["context.retrieval.requested"] + 1,
            "file": "ctxbus.events.RetrievalRequested.avsc",
        }
    )
    (evolved / "registry.json").write_text(json.dumps(index))
    # today's reader: the current schemas, plus knowledge of the new writer id (as an archived file)
    today = tmp_path / "today"
    shutil.copytree(SCHEMAS, today)
    (today / "archive" / "vnext").mkdir(parents=True)
    for f in evolved.glob("*.avsc"):
        shutil.copy(f, today / "archive" / "vnext" / f.name)
    today_index = json.loads((today / "registry.json").read_text())
    today_index["schemas"].append(
        {
            "id": new_id,
            "event_type": "context.retrieval.requested",
            "version": 0,
            "file": "archive/vnext/ctxbus.events.RetrievalRequested.avsc",
        }
    )
    (today / "registry.json").write_text(json.dumps(today_index))
    decoded = EventDeserializer(SchemaRegistry(today))(frame(new_id, body))
    assert decoded == request_event


@pytest.mark.parametrize("name", ["request_event", "completed_event", "injected_event"])
def test_events_written_with_every_archived_version_are_read_today(name: str, request: pytest.FixtureRequest) -> None:
    """Schema versions side by side: an event written by an older producer decodes, new fields defaulted."""
    from ctxbus.contract.serde import frame, to_record

    event: AnyEnvelope = request.getfixturevalue(name)
    registry = SchemaRegistry(SCHEMAS)
    old_entries = [e for e in registry.entries() if e.event_type == event.event_type and e.path.parent != SCHEMAS]
    assert old_entries, f"no archived version of {event.event_type}"
    for entry in old_entries:
        old_fields = {f["name"] for f in fastavro.schema.load_schema(str(entry.path))["fields"][1]["type"]["fields"]}
        record = to_record(event)
        record["payload"] = {k: v for k, v in record["payload"].items() if k in old_fields}
        data = frame(entry.schema_id, _write(entry.path, record))
        decoded = EventDeserializer(registry)(data)
        assert decoded.schema_version == event.schema_version  # the envelope field is what the producer wrote
        # what the old producer wrote (nested records too), with today's defaults for what it did not know
        old_schema = fastavro.schema.load_schema(str(entry.path))
        as_written = fastavro.schemaless_reader(io.BytesIO(_write(entry.path, record)), old_schema, old_schema)
        assert decoded.payload == type(event.payload).model_validate(as_written["payload"])
        assert decoded.event_id == event.event_id
