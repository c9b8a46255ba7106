"""Real parts for integration tests: the embedded broker (one per test worker), real topics,
the real embedder and a real Qdrant Edge store, and the services running in the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import KafkaSettings, ServiceSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_services

from .tls_material import TlsMaterial, make_tls_material

# Several tests write records as any Kafka client would (no doorbell ring) into a sleeping stack and wait for the
# answer with waits fitted to the 5 s fallback of before; the default is 15 s now (docs/idle.md). The tests that are
# about the fallback set their own (tests/integration/test_doorbell.py); the stacks the tests start inherit this.
os.environ.setdefault("CTXBUS_KAFKA_DOORBELL_FALLBACK_MS", "5000")


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    """A test CA and the certificates the secure-transport tests use (made by the openssl command line)."""
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def settings(broker: EmbeddedBroker, tmp_path: Path) -> Settings:
    """Settings isolated per test: own data dir, own topic prefix, the worker's broker."""
    return isolated_settings(broker, tmp_path)


def isolated_settings(broker: EmbeddedBroker, tmp: Path) -> Settings:
    """The ``settings`` fixture's: a data dir under ``tmp``, an own topic prefix, the worker's broker (also for
    a module's shared stack: tests/integration/test_gateway_socket.py)."""
    return Settings(
        data_dir=tmp / "data",
        topic_prefix=f"t{uuid.uuid4().hex[:10]}",
        kafka=KafkaSettings(
            bootstrap_servers=broker.bootstrap_servers,
            enable_idempotence=False,
            fetch_max_wait_ms=5,
            background_fetch_max_wait_ms=100,  # as on the embedded broker
            topic_partitions=3,
        ),
        service=ServiceSettings(max_retries=2, retry_backoff_ms=10, metrics_port=0),
    )


@pytest.fixture
def kafka(settings: Settings) -> KafkaClientConfig:
    return KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=True)


@pytest.fixture
async def topics(settings: Settings, kafka: KafkaClientConfig) -> Topics:
    topics = Topics(settings.topic_prefix)
    await ensure_topics(kafka, topics.all(), partitions=3, replication=1)
    return topics


@contextlib.asynccontextmanager
async def running(coro_factory: object, stop: asyncio.Event) -> AsyncIterator[asyncio.Task[None]]:
    task: asyncio.Task[None] = asyncio.ensure_future(coro_factory)  # type: ignore[arg-type]
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def running_pipeline(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> AsyncIterator[Resources]:
    """The three services in this test's loop, on the worker's broker and a fresh embedded store.

    The yielded resources hold the open store: tests ingest into it while the services run.
    """
    metrics = Metrics()
    res = Resources(settings=settings, metrics=metrics, embedder=embedder, store=open_store(settings, embedder))
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_services(SERVICES, settings, kafka, metrics, stop, res, on_ready=ready.set))
    await asyncio.wait_for(ready.wait(), 60)
    try:
        yield res
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
