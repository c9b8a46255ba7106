"""The dashboard's memory view over HTTP, with the stack's gateway and the bus faked: the page, the items and
sessions handed on, and a forget that needs the gateway's secret (none: 401, wrong: 403) and this page's origin."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import CurationAction, MemoryCurated
from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.memory_view import GatewayError, MemoryView
from ctxbus.dashboard.server import DashboardServer

SECRET = "s3cret-token"


class Fakes:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.published: list[Envelope[MemoryCurated]] = []
        self.down = False

    async def gateway(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append((path, body))
        if self.down:
            raise GatewayError(503, "cannot reach the running stack's gateway")
        if path == "/v1/memory/list":
            return {"items": [{"id": "reset", "project": "acme"}]}
        return {"sessions": [{"session_id": "s-1", "changed": []}]}

    async def publish(self, event: Envelope[MemoryCurated]) -> None:
        self.published.append(event)


@pytest.fixture
async def served() -> AsyncIterator[tuple[DashboardServer, Fakes]]:
    fakes = Fakes()
    view = MemoryView(fakes.gateway, fakes.publish, lambda: SECRET)
    server = DashboardServer(Aggregator(), port=0, memory=view)
    await server.start()
    try:
        yield server, fakes
    finally:
        await server.stop()


async def fetch(
    server: DashboardServer, path: str, *, body: object = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    def run() -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", data=data, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=5) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if path.startswith("/api") else raw.decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    return await asyncio.to_thread(run)


async def test_the_page_and_the_items_and_sessions_of_the_stack(served: tuple[DashboardServer, Fakes]) -> None:
    server, fakes = served
    status, page = await fetch(server, "/memory")
    assert status == 200 and "/static/memory.js" in page
    status, script = await fetch(server, "/static/memory.js")
    assert status == 200 and "/api/memory/forget" in script
    assert await fetch(server, "/api/memory?project=acme&kind=warning&stale=1") == (
        200,
        {"items": [{"id": "reset", "project": "acme"}]},
    )
    assert await fetch(server, "/api/memory/sessions?limit=5") == (
        200,
        {"sessions": [{"session_id": "s-1", "changed": []}]},
    )
    assert fakes.calls == [
        ("/v1/memory/list", {"project": "acme", "kind": "warning", "stale": True}),
        ("/v1/memory/sessions", {"project": None, "limit": 5}),
    ]
    assert (await fetch(server, "/api/memory?stale=maybe"))[0] == 400
    assert (await fetch(server, "/api/memory/sessions?limit=0"))[0] == 400
    fakes.down = True
    status, error = await fetch(server, "/api/memory")
    assert status == 503 and "cannot reach" in error["error"]


async def test_forgetting_needs_the_secret_and_this_pages_origin(served: tuple[DashboardServer, Fakes]) -> None:
    server, fakes = served
    body = {"project": "acme", "ids": ["reset"]}
    assert (await fetch(server, "/api/memory/forget", body=body))[0] == 401
    assert (await fetch(server, "/api/memory/forget", body=body, headers={"X-Ctxbus-Token": "guess"}))[0] == 403
    foreign = {"X-Ctxbus-Token": SECRET, "Origin": "http://evil.example"}
    assert (await fetch(server, "/api/memory/forget", body=body, headers=foreign))[0] == 403
    assert fakes.published == []
    assert (await fetch(server, "/api/memory/forget", body={"ids": "x"}, headers={"X-Ctxbus-Token": SECRET}))[0] == 400
    assert (await fetch(server, "/api/memory/forget"))[0] == 405  # a GET
    own = {"Authorization": f"Bearer {SECRET}", "Origin": f"http://127.0.0.1:{server.port}"}
    status, answer = await fetch(server, "/api/memory/forget", body=body, headers=own)
    assert status == 200 and answer["queued"] == ["reset"]
    (event,) = fakes.published
    assert event.project == "acme" and event.payload.action is CurationAction.FORGET and event.payload.ids == ("reset",)
    assert str(event.event_id) == answer["event_id"]
