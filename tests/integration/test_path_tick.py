"""The gateway sends the request path a warm ring after a silence (``CTXBUS_KAFKA_DOORBELL_WARM_MS``): a sleeping
consumer of the requested topic is woken for a moment with no hook and no record (a fallback of 600 s makes a ring
the only way), never with a full ring, and nothing is published."""

from __future__ import annotations

import asyncio
import time

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.settings import GatewaySettings, Settings
from ctxbus.wiring import run_gateway

from .kafka_io import read_all
from .test_doorbell import NEVER_MS, WAIT_S, _running
from .test_runner import EchoHandler, make_runner

pytestmark = pytest.mark.integration


def with_tick(settings: Settings, warm_ms: int) -> tuple[Settings, KafkaClientConfig]:
    kafka_settings = settings.kafka.model_copy(update={"doorbell_fallback_ms": NEVER_MS, "doorbell_warm_ms": warm_ms})
    changed = settings.model_copy(update={"kafka": kafka_settings, "gateway": GatewaySettings(port=0)})
    return changed, KafkaClientConfig(kafka_settings, kafka_settings.bootstrap_servers, embedded=True)


async def test_a_silent_gateway_rings_the_sleeping_request_path_awake(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    settings, kafka = with_tick(settings, 200)
    stop = asyncio.Event()
    async with EventPublisher(kafka, "t") as pub:
        retriever = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async for _ in _running(retriever):  # asleep: it found nothing and waits for a ring
            assert retriever.quiet is not None
            before = retriever.quiet.woken["warm"]
            gateway = asyncio.create_task(run_gateway(settings, kafka, Metrics(), stop))
            try:
                deadline = time.monotonic() + WAIT_S
                while retriever.quiet.woken["warm"] < before + 2:  # rung again and again while nothing comes
                    assert time.monotonic() < deadline, "the silent gateway never rang the request path"
                    assert not gateway.done(), gateway
                    await asyncio.sleep(0.05)
            finally:
                stop.set()
                await asyncio.wait_for(gateway, 30)
            assert retriever.quiet.woken["fallback"] == 0
            assert retriever.quiet.woken["rung"] == 0  # a warm ring each time, never the full one of a hook
    assert await read_all(kafka, topics.retrieval_requested, expect=0, timeout_s=1.0) == []


async def test_no_tick_when_it_is_off(settings: Settings, topics: Topics, metrics: Metrics) -> None:
    settings, kafka = with_tick(settings, 0)
    stop = asyncio.Event()
    async with EventPublisher(kafka, "t") as pub:
        retriever = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async for _ in _running(retriever):
            assert retriever.quiet is not None
            before = retriever.quiet.woken["warm"]
            ports: list[int] = []
            gateway = asyncio.create_task(run_gateway(settings, kafka, Metrics(), stop, on_ready=ports.append))
            try:
                deadline = time.monotonic() + WAIT_S
                while not ports:
                    assert time.monotonic() < deadline, "the gateway never listened"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.0)  # five periods of the other test's tick
            finally:
                stop.set()
                await asyncio.wait_for(gateway, 30)
            assert retriever.quiet.woken["warm"] == before and retriever.quiet.woken["rung"] == 0
