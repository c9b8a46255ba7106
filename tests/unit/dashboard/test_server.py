"""The dashboard's HTTP server without Kafka: assets, the JSON snapshot, the event stream, and clients
that go away (the server forgets them and keeps serving)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.server import DashboardServer

from .test_aggregate import dead, row


@pytest.fixture
async def server() -> AsyncIterator[DashboardServer]:
    s = DashboardServer(Aggregator(), port=0, max_clients=3, min_interval_s=0.05, refresh_s=0.5)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def get(server: DashboardServer, path: str) -> tuple[int, dict[str, str], bytes]:
    def fetch() -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    return await asyncio.to_thread(fetch)


class Stream:
    """A raw SSE client on a socket: reads ``snapshot`` events one by one."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: DashboardServer, query: str = "") -> Stream:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=4 * 1024 * 1024)
        head = f"GET /api/events{query} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n\r\n"
        writer.write(head.encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"text/event-stream" in head
        return cls(reader, writer)

    async def next_snapshot(self, within: float = 5.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                block = (await self.reader.readuntil(b"\n\n")).decode()
                lines = dict(line.split(": ", 1) for line in block.strip().splitlines() if ": " in line)
                if lines.get("event") == "snapshot":
                    snapshot: dict[str, Any] = json.loads(lines["data"])
                    return snapshot

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def wait_until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_page_and_assets_are_served_from_the_package(server: DashboardServer) -> None:
    status, headers, body = await get(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<script src="/static/app.js"' in body and b"ctxbus" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    status, headers, body = await get(server, "/static/app.js")
    assert status == 200 and "javascript" in headers["Content-Type"] and b"EventSource" in body
    status, _, body = await get(server, "/static/app.css")
    assert status == 200 and b":root" in body
    assert (await get(server, "/static/../server.py"))[0] == 404
    assert (await get(server, "/nothing"))[0] == 404


async def test_snapshot_endpoint_answers_json_with_the_view_and_rejects_bad_rows(server: DashboardServer) -> None:
    agg = server.aggregator
    agg.add_injection(row(project="acme/web"))
    agg.add_injection(row(project="other/app", chars=0, reason="empty_prompt"))
    server.notify()
    status, headers, body = await get(server, "/api/snapshot?project=other%2Fapp&rows=5")
    assert status == 200 and headers["Content-Type"] == "application/json"
    snap = json.loads(body)
    assert snap["project"] == "other/app" and snap["totals"]["injections"] == 1
    assert snap["empty_reasons"] == {"empty_prompt": 1}
    assert (await get(server, "/api/snapshot?rows=0"))[0] == 400
    assert (await get(server, "/api/snapshot?rows=x"))[0] == 400


async def test_a_stream_sends_a_snapshot_at_once_and_again_when_data_arrives() -> None:
    # no refresh by the clock within the test (600 s): the second snapshot can only be the one the data caused
    server = DashboardServer(Aggregator(), port=0, max_clients=3, min_interval_s=0.05, refresh_s=600)
    await server.start()
    stream = await Stream.open(server, "?project=acme/web")
    try:
        first = await stream.next_snapshot()
        assert first["totals"]["injections"] == 0 and first["project"] == "acme/web"
        server.aggregator.add_injection(row(project="acme/web", event_id="e-1"))
        server.aggregator.add_dead_letter(dead(project="acme/web"))
        server.notify()
        snap = await stream.next_snapshot(within=30)
        assert snap["totals"]["injections"] == 1
        assert snap["recent"][0]["id"] == "e-1"
        assert snap["totals"]["dead_letters"] == 1
        assert server.clients == 1
    finally:
        await stream.close()
        await server.stop()


async def test_clients_that_disconnect_are_forgotten_and_the_server_keeps_serving(server: DashboardServer) -> None:
    streams = [await Stream.open(server) for _ in range(3)]
    for s in streams:
        await s.next_snapshot()
    assert server.clients == 3
    # a fourth is refused while three are open (max_clients=3), not queued
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 503")
    writer.close()
    # one closes cleanly, one is reset mid-stream, one stays
    await streams[0].close()
    streams[1].writer.transport.abort()
    for _ in range(5):  # data keeps flowing while they go
        server.aggregator.add_injection(row())
        server.notify()
        await asyncio.sleep(0.02)
    await wait_until(lambda: server.clients == 1, within=30)
    # snapshots sent while the server had not yet noticed both goings say 3 or 2: a busy machine queues several;
    # the one after the next notify says 1
    server.notify()
    seen = [(await streams[2].next_snapshot(within=30))["clients"]]
    while seen[-1] != 1 and len(seen) < 20:
        seen.append((await streams[2].next_snapshot(within=30))["clients"])
    assert seen[-1] == 1, seen
    status, _, body = await get(server, "/api/snapshot")
    assert status == 200 and json.loads(body)["totals"]["injections"] == 5
    await streams[2].close()
    await wait_until(lambda: server.clients == 0 and server.connections == 0)


async def test_a_quiet_stream_still_refreshes(server: DashboardServer) -> None:
    stream = await Stream.open(server)
    try:
        await stream.next_snapshot()
        # refresh_s=0.5: the clock moves without events (what is checked is that it comes, not how punctually)
        await stream.next_snapshot(within=10)
    finally:
        await stream.close()


async def test_stop_closes_open_streams(server: DashboardServer) -> None:
    stream = await Stream.open(server)
    await stream.next_snapshot()
    await asyncio.wait_for(server.stop(), 5)
    assert await asyncio.wait_for(stream.reader.read(), 5) == b""
    assert server.clients == 0
