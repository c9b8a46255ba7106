"""Every service process answers /healthz and /readyz (issue 12): ready once its consumers have their
partitions, the broker answers them and its store answers."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import GatewaySettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

pytestmark = pytest.mark.integration


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_readyz_follows_the_services_and_the_gateway(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> None:
    settings = settings.model_copy(update={"gateway": GatewaySettings(port=0)})
    metrics = Metrics()
    port = metrics.serve("127.0.0.1", 0)
    base = f"http://127.0.0.1:{port}"
    status, body = await asyncio.to_thread(_get, f"{base}/readyz")
    assert status == 503 and body["ready"] is False  # nothing runs yet
    res = Resources(settings=settings, metrics=metrics, embedder=embedder, store=open_store(settings, embedder))
    stop, ready = asyncio.Event(), asyncio.Event()
    gateway_port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    services = asyncio.create_task(run_services(SERVICES, settings, kafka, metrics, stop, res, on_ready=ready.set))
    gateway = asyncio.create_task(run_gateway(settings, kafka, metrics, stop, on_ready=gateway_port.set_result))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        await asyncio.wait_for(gateway_port, 30)
        status, body = await asyncio.to_thread(_get, f"{base}/readyz")
        assert status == 200, body
        checks = body["checks"]
        assert isinstance(checks, dict)
        assert {"consumer:retriever", "consumer:injector", "consumer:recorder", "store", "gateway"} <= set(checks)
        assert set(checks.values()) == {"ok"}
        assert await asyncio.to_thread(_get, f"{base}/healthz") == (200, {"alive": True})
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)
    status, body = await asyncio.to_thread(_get, f"{base}/readyz")
    assert status == 503 and body["checks"] == {}  # stopped services are not ready
