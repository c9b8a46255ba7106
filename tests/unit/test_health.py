"""Liveness and readiness endpoints beside /metrics."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from ctxbus.health import Health
from ctxbus.observability import Metrics


def test_readiness_needs_every_check_and_at_least_one() -> None:
    health = Health()
    assert health.readiness() == (False, {})
    health.add("a", lambda: None)
    assert health.readiness() == (True, {"a": "ok"})
    health.add("b", lambda: "waiting for its partitions")
    assert health.readiness() == (False, {"a": "ok", "b": "waiting for its partitions"})

    def broken() -> str | None:
        raise OSError("store gone")

    health.add("b", broken)
    ready, checks = health.readiness()
    assert not ready and checks["b"] == "OSError: store gone"
    health.remove("b")
    assert health.readiness()[0]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_metrics_port_serves_healthz_readyz_and_metrics() -> None:
    metrics = Metrics()
    port = metrics.serve("127.0.0.1", 0)
    base = f"http://127.0.0.1:{port}"
    assert _get(f"{base}/healthz") == (200, json.dumps({"alive": True}))
    status, body = _get(f"{base}/readyz")
    assert status == 503 and json.loads(body) == {"checks": {}, "ready": False}
    metrics.health.add("consumer:retriever", lambda: None)
    status, body = _get(f"{base}/readyz")
    assert status == 200 and json.loads(body)["checks"] == {"consumer:retriever": "ok"}
    metrics.consumed.labels("retriever", "t", "processed").inc()
    status, body = _get(f"{base}/metrics")
    assert status == 200 and "ctxbus_events_consumed_total" in body


@pytest.mark.parametrize("path", ["/nope", "/metrics?name[]=ctxbus_events_consumed_total"])
def test_other_paths_are_the_prometheus_app_s(path: str) -> None:
    metrics = Metrics()
    port = metrics.serve("127.0.0.1", 0)
    status, _ = _get(f"http://127.0.0.1:{port}{path}")
    assert status == 200  # prometheus_client answers every path with the exposition
