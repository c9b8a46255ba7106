"""A second, independent Kafka client (librdkafka via confluent-kafka) reads what ctxbus wrote and
decodes it with nothing but schemas/ and fastavro: the contract analysts and dashboards rely on."""

from __future__ import annotations

import io
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import fastavro
import fastavro.schema
import pytest
from confluent_kafka import Consumer, Producer

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics

pytestmark = pytest.mark.integration

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def decode(value: bytes) -> dict[str, Any]:
    index = {r["id"]: r for r in json.loads((SCHEMAS / "registry.json").read_text())["schemas"]}
    magic, schema_id = struct.unpack(">bI", value[:5])
    assert magic == 0
    schema = fastavro.schema.load_schema(str(SCHEMAS / index[schema_id]["file"]))
    record: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, schema)
    return record


async def test_librdkafka_reads_and_fastavro_decodes(kafka: KafkaClientConfig, topics: Topics) -> None:
    event = Envelope.root(
        RetrievalRequested(agent_name="a", prompt="Fix login", trigger=Trigger.USER_PROMPT),
        project="acme",
        session_id="s",
        producer="test",
    )
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(topics.retrieval_requested, event)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": "interop",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topics.retrieval_requested])
    try:
        msg = None
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        record = decode(msg.value())
        headers = {k: v.decode() for k, v in msg.headers() or []}
        assert msg.key() == str(event.entity_id).encode()
    finally:
        consumer.close()
    assert record["envelope"]["event_id"] == event.event_id
    assert record["envelope"]["correlation_id"] == event.correlation_id
    assert record["payload"]["prompt"] == "Fix login" and record["payload"]["trigger"] == "user_prompt"
    assert headers["ctxbus-event-type"] == "context.retrieval.requested"
    assert headers["ctxbus-correlation-id"] == str(event.correlation_id)


#: schemas/README.md's recipe for the key, written out here independently of ctxbus's code
ENTITY_NAMESPACE = uuid.UUID("0d6f5a7e-8b0e-4f0e-9d57-61c3f1f4a2b9")


def documented_key(project: str, session_id: str) -> bytes:
    return str(uuid.uuid5(ENTITY_NAMESPACE, f"entity\x1f{project}\x1f{session_id}")).encode()


async def test_a_confluent_producer_following_the_readme_keeps_each_session_on_ctxbus_s_partition(
    kafka: KafkaClientConfig, topics: Topics
) -> None:
    """Another team's producer (librdkafka) with schemas/README.md's key and partitioner lands every session
    where ctxbus's own producer puts it, so per-session order holds across producers."""
    sessions = [("acme/web", f"session-{i}") for i in range(24)]
    ours: dict[bytes, int] = {}
    async with EventPublisher(kafka, "t") as pub:
        for project, session in sessions:
            event = Envelope.root(
                RetrievalRequested(agent_name="a", prompt="p", trigger=Trigger.USER_PROMPT),
                project=project,
                session_id=session,
                producer="test",
            )
            assert str(event.entity_id).encode() == documented_key(project, session)
            meta = await pub.publish(topics.retrieval_requested, event)
            ours[documented_key(project, session)] = meta.partition
    assert len(set(ours.values())) > 1  # the sessions spread: the comparison below means something
    theirs: dict[bytes, int] = {}

    def delivered(err: object, msg: Any) -> None:
        assert err is None, err
        theirs[msg.key()] = msg.partition()

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "partitioner": "murmur2_random"})
    for project, session in sessions:
        producer.produce(
            topics.retrieval_requested, value=b"x", key=documented_key(project, session), on_delivery=delivered
        )
    assert producer.flush(30) == 0
    assert theirs == ours
