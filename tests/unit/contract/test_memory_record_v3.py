"""Memory record v3 (schema id 18): provenance, named files, occurrences and staleness travel on the wire and in a
store's point payload; events written with v2 (id 11) read today with their defaults."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import fastavro
import fastavro.schema

from ctxbus.adapters.store_payload import item_payload, payload_item
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryUpserted
from ctxbus.contract.registry import SchemaRegistry
from ctxbus.contract.serde import EventDeserializer, EventSerializer, frame, to_record, unframe
from ctxbus.memory.model import CAPTURED_SOURCE, FileRef, MemoryItem, Provenance

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
AT = datetime(2026, 11, 27, 12, 0, 0, 123_000, tzinfo=UTC)


def captured_item() -> MemoryItem:
    return MemoryItem(
        id="cap-1",
        project="acme/web",
        kind="learning",
        content="TokenExpired in test_reset: fixed in app/auth/reset.py; verified by pytest tests/test_reset.py",
        source=CAPTURED_SOURCE,
        confidence=0.35,
        provenance=Provenance(
            session_id="s-1",
            hook_event="Stop",
            transcript_start=120,
            transcript_end=9_876,
            rule="failure_fix",
            captured_at=AT,
        ),
        files=(FileRef(path="app/auth/reset.py", sha256="ab" * 32), FileRef(path="tests/test_reset.py")),
        occurrences=3,
        stale="app/auth/reset.py was deleted",
        stale_since=AT,
        created_at=AT,
        updated_at=AT,
    )


def upserted() -> Envelope[MemoryUpserted]:
    return Envelope.root(MemoryUpserted(items=(captured_item(),)), project="acme/web", session_id="s-1", producer="t")


def test_the_new_fields_round_trip_through_the_wire() -> None:
    event = upserted()
    data = EventSerializer()(event)
    schema_id, _ = unframe(data)
    assert schema_id == 18
    decoded = EventDeserializer()(data)
    assert decoded.payload == event.payload
    (item,) = decoded.payload.items  # type: ignore[attr-defined]
    assert item.provenance.transcript_end == 9_876 and item.occurrences == 3 and item.files[0].sha256 == "ab" * 32


def test_a_v2_event_reads_today_with_the_new_fields_defaulted() -> None:
    registry = SchemaRegistry(SCHEMAS)
    (v2,) = [e for e in registry.entries() if e.schema_id == 11]
    record = to_record(upserted())
    old_fields = {f["name"] for f in json.loads((SCHEMAS / "ctxbus.payloads.MemoryRecord.avsc").read_text())["fields"]}
    old_fields -= {"provenance", "files", "occurrences", "stale", "stale_since"}
    record["payload"]["items"] = [{k: v for k, v in i.items() if k in old_fields} for i in record["payload"]["items"]]
    schema = fastavro.schema.load_schema(str(v2.path))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    decoded = EventDeserializer(registry)(frame(11, buf.getvalue()))
    (item,) = decoded.payload.items  # type: ignore[attr-defined]
    assert item.provenance is None and item.files == () and item.occurrences == 1 and item.stale is None
    assert item.content == captured_item().content


def test_the_store_payload_keeps_the_new_fields() -> None:
    item = captured_item()
    payload = json.loads(json.dumps(item_payload(item)))  # what an engine hands back: plain JSON
    assert payload_item(payload) == item


def test_an_imported_item_has_no_provenance_and_counts_once() -> None:
    item = MemoryItem(id="x", project="p", kind="principle", content="Use pnpm.")
    assert item.provenance is None and item.occurrences == 1 and item.files == () and not item.captured
