"""The dashboard answers only requests addressed to it by a loopback name (or a name it was told to allow):
a DNS-rebound name (``evil.example`` resolving to 127.0.0.1) must not let a web page read the injections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.server import DashboardServer


async def raw_get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"GET {path} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "") + "Connection: close\r\n\r\n"
    writer.write(head.encode("latin-1"))
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    status_line = raw.split(b"\r\n", 1)[0]
    return int(status_line.split(b" ")[1]), raw


@pytest.fixture
async def server() -> AsyncIterator[DashboardServer]:
    s = DashboardServer(Aggregator(), port=0, allowed_hosts=("dash.internal", "10.0.0.5:9000"))
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.mark.parametrize("path", ["/", "/api/snapshot", "/api/injection?id=x", "/api/events"])
async def test_a_rebound_name_is_refused_on_every_page(server: DashboardServer, path: str) -> None:
    status, body = await raw_get(server.port, path, f"evil.example:{server.port}")
    assert status == 403 and b"CTXBUS_DASHBOARD_ALLOWED_HOSTS" in body
    status, _ = await raw_get(server.port, path, None)  # HTTP/1.1 needs a Host
    assert status == 403


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
async def test_loopback_names_with_the_dashboards_port_are_answered(server: DashboardServer, name: str) -> None:
    status, _ = await raw_get(server.port, "/api/snapshot", f"{name}:{server.port}")
    assert status == 200
    status, _ = await raw_get(server.port, "/api/snapshot", name)
    assert status == 200
    status, _ = await raw_get(server.port, "/api/snapshot", f"{name}:{server.port + 1}")
    assert status == 403  # another port on loopback is another origin


async def test_allowed_names_are_answered(server: DashboardServer) -> None:
    assert (await raw_get(server.port, "/", "dash.internal:8080"))[0] == 200  # a name alone admits any port
    assert (await raw_get(server.port, "/", "10.0.0.5:9000"))[0] == 200
    assert (await raw_get(server.port, "/", "10.0.0.5:9001"))[0] == 403


async def test_a_dashboard_bound_to_a_named_address_answers_that_name() -> None:
    s = DashboardServer(Aggregator(), host="127.0.0.2", port=0)
    await s.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.2", s.port)
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.2:{s.port}\r\n\r\n".encode())
        await writer.drain()
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        await s.stop()
