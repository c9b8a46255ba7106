"""A consumer with older schemas/ reads a newer producer's events through the schemas topic (issue 12);
what it still cannot read is dead-lettered with a message telling the operator to update."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import fastavro
import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader
from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.registry import SchemaEntry, SchemaRegistry, default_registry
from ctxbus.contract.schema_doc import schema_document, schema_key
from ctxbus.contract.serde import (
    HEADER_DEAD_LETTER,
    decode_dead_letter,
    event_headers,
    frame,
    to_record,
)
from ctxbus.contract.topics import Topics
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .kafka_io import read_all

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: ids no released ctxbus uses (a newer producer's); the worker's registry learns the first
ANNOUNCED_ID, UNANNOUNCED_ID = 4242, 4243


def newer_request_schema(tmp_path: Path, schema_id: int) -> SchemaEntry:
    """The request schema of a ctxbus one version ahead (an optional field more), under ``schema_id``."""
    target = tmp_path / f"schemas-{schema_id}"
    shutil.copytree(ROOT / "schemas", target)
    path = target / "ctxbus.payloads.RetrievalRequested.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append({"name": "urgency", "type": ["null", "string"], "default": None})
    path.write_text(json.dumps(schema))
    index = json.loads((target / "registry.json").read_text())
    version = default_registry().current(EventType.RETRIEVAL_REQUESTED).version + 1
    index["schemas"].append(
        {
            "id": schema_id,
            "event_type": EventType.RETRIEVAL_REQUESTED,
            "version": version,
            "file": "ctxbus.events.RetrievalRequested.avsc",
        }
    )
    (target / "registry.json").write_text(json.dumps(index))
    return SchemaRegistry(target).by_id(schema_id)


def newer_event(entry: SchemaEntry, prompt: str) -> tuple[Envelope[RetrievalRequested], bytes]:
    event = Envelope.root(
        RetrievalRequested(agent_name="newer", prompt=prompt, trigger=Trigger.USER_PROMPT),
        project="acme/web",
        session_id="s-newer",
        producer="newer-ctxbus",
    )
    record = to_record(event)
    record["payload"]["urgency"] = "high"
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, entry.schema, record)
    return event, frame(entry.schema_id, buf.getvalue())


async def test_a_newer_producers_event_is_answered_once_its_schema_is_announced(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    announced = newer_request_schema(tmp_path, ANNOUNCED_ID)
    unannounced = newer_request_schema(tmp_path, UNANNOUNCED_ID)
    good, good_bytes = newer_event(announced, "Fix login after password reset")
    bad, bad_bytes = newer_event(unannounced, "Something newer still")
    async with EventPublisher(kafka, "newer") as pub:
        await pub.publish_raw(topics.schemas, schema_document(announced), schema_key(ANNOUNCED_ID), [])
        for event, value, schema_id in ((good, good_bytes, ANNOUNCED_ID), (bad, bad_bytes, UNANNOUNCED_ID)):
            headers = event_headers(event, schema_id)
            headers = [(k, str(announced.version).encode() if k == "ctxbus-schema-version" else v) for k, v in headers]
            await pub.publish_raw(topics.retrieval_requested, value, str(event.entity_id).encode(), headers)

    injected = await read_all(kafka, topics.context_injected, expect=1, timeout_s=30)
    answered = {dict(r.headers)["ctxbus-correlation-id"].decode() for r in injected}
    assert str(good.correlation_id) in answered
    assert str(bad.correlation_id) not in answered

    (dead,) = await read_all(kafka, topics.dead_letter, expect=1, timeout_s=30)
    letter = decode_dead_letter(dict(dead.headers)[HEADER_DEAD_LETTER])
    assert letter.error_message.startswith("unknown_schema_id")
    assert "newer ctxbus" in letter.error_message and "update" in letter.error_message
    assert f"version {announced.version}" in letter.error_message


async def test_every_service_publisher_announces_the_schemas_it_writes(
    running_pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    fresh = SchemaRegistry(ROOT / "schemas")
    learned = await SchemaTopicReader(kafka, topics.schemas, fresh).learn()
    assert learned == 0  # all known already: the documents describe this code's own ids
    docs = await read_all(kafka, topics.schemas, expect=1, timeout_s=10)
    ids = {int(r.key) for r in docs}
    current = {fresh.current(t).schema_id for t in (EventType.RETRIEVAL_COMPLETED, EventType.CONTEXT_INJECTED)}
    assert current <= ids
