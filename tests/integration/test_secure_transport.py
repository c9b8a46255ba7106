"""ctxbus's clients over TLS and SASL, configured by ``CTXBUS_KAFKA_*`` only, through the test front.

Each case creates a topic with the admin client, publishes a real ctxbus event with ``EventPublisher`` and
reads it back with a consumer, all through ``secure_front.SecureFront`` (TLS and SASL terminated there, a
real Tansu behind it). The front records every connection it let through: each test checks that all of
them carried the expected TLS, user and mechanism, so a client that skipped security would fail here.
Scope: this checks ctxbus against an RFC-conformant server written for the tests, not a broker's own
SASL/TLS implementation (see docs/deployment.md, "Kafka security").
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.components import open_store
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import KafkaSettings, ServiceSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_services

from .kafka_io import read_all
from .secure_env import MECHANISMS, USER, USERS, front_env, needs_openssl, settings_from
from .secure_front import SecureFront, server_tls
from .tls_material import TlsMaterial

pytestmark = [pytest.mark.integration, needs_openssl]


def _request(prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="claude-code", prompt=prompt, trigger=Trigger.USER_PROMPT)
    return Envelope.root(payload, project="acme/web", session_id="secure-1", producer="test")


async def round_trip(settings: KafkaSettings) -> None:
    """Admin, producer and consumer of ctxbus through ``settings``: the event read back is the one sent."""
    config = KafkaClientConfig(settings, settings.bootstrap_servers, embedded=False)
    topic = f"secure-{uuid.uuid4().hex[:10]}"
    assert await ensure_topics(config, [topic], partitions=1, replication=1) == [topic]
    sent = _request("how do we rotate the signing keys?")
    async with EventPublisher(config, "secure-test") as publisher:
        await publisher.publish(topic, sent)
    records = await read_all(config, topic, expect=1)
    received = [EventDeserializer()(r.value) for r in records]
    assert [(e.correlation_id, e.payload) for e in received] == [(sent.correlation_id, sent.payload)]


def _assert_sessions(front: SecureFront, *, user: str | None, mechanism: str | None, tls: bool) -> None:
    assert front.sessions, "no connection went through the front"
    assert not front.refused, front.refused
    for session in front.sessions:
        assert (session.user, session.mechanism) == (user, mechanism)
        assert (session.tls_version is not None) is tls
        if tls:
            assert session.tls_version in ("TLSv1.2", "TLSv1.3")


async def test_ssl_round_trip(tls_material: TlsMaterial) -> None:
    async with SecureFront(tls=server_tls(tls_material.server)) as front:
        await round_trip(settings_from(front_env(front, "SSL", cafile=tls_material.ca)))
    _assert_sessions(front, user=None, mechanism=None, tls=True)


async def test_mutual_tls_round_trip(tls_material: TlsMaterial) -> None:
    tls = server_tls(tls_material.server, client_ca=tls_material.ca)
    async with SecureFront(tls=tls) as front:
        env = front_env(
            front,
            "SSL",
            cafile=tls_material.ca,
            certfile=tls_material.client.cert,
            keyfile=tls_material.client.key,
        )
        await round_trip(settings_from(env))
    _assert_sessions(front, user=None, mechanism=None, tls=True)
    assert {s.client_cert_subject for s in front.sessions} == {"commonName=client"}


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_sasl_plaintext_round_trip(mechanism: str) -> None:
    async with SecureFront(mechanisms=MECHANISMS, users=USERS) as front:
        await round_trip(settings_from(front_env(front, "SASL_PLAINTEXT", mechanism=mechanism)))
    _assert_sessions(front, user=USER, mechanism=mechanism, tls=False)


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_sasl_ssl_round_trip(mechanism: str, tls_material: TlsMaterial) -> None:
    async with SecureFront(tls=server_tls(tls_material.server), mechanisms=MECHANISMS, users=USERS) as front:
        await round_trip(settings_from(front_env(front, "SASL_SSL", mechanism=mechanism, cafile=tls_material.ca)))
    _assert_sessions(front, user=USER, mechanism=mechanism, tls=True)


async def test_the_pipeline_over_sasl_ssl_with_a_client_certificate(
    tls_material: TlsMaterial, embedder: Embedder, tmp_path: Path
) -> None:
    """The three services (consumer groups, producers, the reply router) answer a request over SASL_SSL,
    SCRAM-SHA-512, with a client certificate."""
    tls = server_tls(tls_material.server, client_ca=tls_material.ca)
    async with SecureFront(tls=tls, mechanisms=("SCRAM-SHA-512",), users=USERS) as front:
        env = front_env(
            front,
            "SASL_SSL",
            mechanism="SCRAM-SHA-512",
            cafile=tls_material.ca,
            certfile=tls_material.client.cert,
            keyfile=tls_material.client.key,
        )
        kafka = settings_from(env)
        settings = Settings(
            data_dir=tmp_path / "data",
            topic_prefix=f"s{uuid.uuid4().hex[:8]}",
            kafka=kafka,
            service=ServiceSettings(max_retries=2, retry_backoff_ms=10, metrics_port=0),
        )
        config = KafkaClientConfig(kafka, kafka.bootstrap_servers, embedded=False)
        topics = Topics(settings.topic_prefix)
        await ensure_topics(config, topics.all(), partitions=1, replication=1, compacted=(topics.schemas,))
        res = Resources(settings=settings, metrics=Metrics(), embedder=embedder, store=open_store(settings, embedder))
        assert res.store is not None
        memory = MemoryItem(
            id="key-rotation",
            kind=MemoryKind.PATTERN,
            project="acme/web",
            title="Signing key rotation",
            content="Signing keys rotate every 90 days through the vault job; never commit a key.",
            confidence=0.9,
        )
        ingest([memory], embedder, res.store)
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run_services(SERVICES, settings, config, res.metrics, stop, res, on_ready=ready.set))
        try:
            await asyncio.wait_for(ready.wait(), 60)
            question = _request("how do we rotate the signing keys?")
            injected = await request_injection(config, topics, question, 30, client_id="cli")
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
    assert memory.id in injected.payload.item_ids
    _assert_sessions(front, user=USER, mechanism="SCRAM-SHA-512", tls=True)
    assert {s.client_cert_subject for s in front.sessions} == {"commonName=client"}
