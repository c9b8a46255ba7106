"""The dashboard's HTTP side, on asyncio streams (like the gateway's server, ``ctxbus.gateway.http``).

Routes (GET only, but the memory view's forget; ``/memory`` and ``/api/memory...``: ctxbus.dashboard.memory_view):
- ``/``, ``/static/app.js``, ``/static/app.css``: the page, shipped as package data, read once at start;
- ``/api/snapshot?project=P&rows=N``: the current snapshot as JSON;
- ``/api/injection?id=CORRELATION_ID``: one injection opened (request, ranked items and their score
  breakdowns, the context; core.inspection), 404 when it is no longer kept;
- ``/api/events?project=P&rows=N``: Server-Sent Events, one ``snapshot`` event whenever the data changed
  (at most one per ``min_interval_s`` per client; a slow client gets the latest state, never a queue)
  and at least one every ``refresh_s`` (the clock moves even when no event arrives);
- ``/healthz``.

Every route answers only a request whose ``Host`` is a loopback name with the dashboard's port, the address it
listens on, or an allowed name (``allowed_hosts``); anything else is a 403 (core.hosts: no DNS rebinding).

A snapshot is the aggregates and the last rows of one view, computed once per change and view and
shared by every client of that view. A client that goes away (EOF on its socket, a failed or stuck
write) is dropped and forgotten; at most ``max_clients`` streams are open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.topics import Topics
from ctxbus.core.hosts import allowed_set, bound_name, host_allowed
from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.feed import DEFAULT_BACKLOG, DashboardFeed
from ctxbus.dashboard.memory_view import MemoryView

log = structlog.get_logger("ctxbus.dashboard.server")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8477
#: time a client may take to send its request head
READ_TIMEOUT_S = 5.0
#: time one write to a client may take before the client is dropped
WRITE_TIMEOUT_S = 5.0
MAX_HEADER_BYTES = 16_384
HOST_REFUSED = (
    "Host {host!r} is not this dashboard's address (127.0.0.1, localhost or [::1] with its port, or the address "
    "it listens on; others: CTXBUS_DASHBOARD_ALLOWED_HOSTS or --allowed-host)"
)
DEFAULT_ROWS = 50
MAX_ROWS = 100
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
#: the page's assets: URL path -> (file in the package's static/ folder, content type)
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/memory": ("memory.html", "text/html; charset=utf-8"),
    "/static/memory.js": ("memory.js", "text/javascript; charset=utf-8"),
}
SECURITY_HEADERS = (
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Content-Security-Policy: default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'\r\n"
)


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    host: str | None = None
    #: header names in lower case
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class _Client:
    project: str | None
    rows: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)


def load_assets() -> dict[str, tuple[bytes, str]]:
    static = resources.files("ctxbus.dashboard").joinpath("static")
    return {path: (static.joinpath(name).read_bytes(), ctype) for path, (name, ctype) in ASSETS.items()}


async def read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEADER_BYTES:
        raise BadRequest(400, "request head too large")
    request_line = head.decode("latin-1").split("\r\n", 1)[0]
    try:
        method, target, _version = request_line.split(" ", 2)
    except ValueError:
        raise BadRequest(400, "malformed request line") from None
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers.setdefault(name.strip().lower(), value.strip())
    return Request(method.upper(), url.path, query, headers.get("host"), headers)


def response(status: int, body: bytes, content_type: str) -> bytes:
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def json_response(status: int, body: Any) -> bytes:
    return response(status, json.dumps(body, separators=(",", ":")).encode(), "application/json")


class DashboardServer:
    def __init__(
        self,
        aggregator: Aggregator,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        status: Callable[[], dict[str, Any]] = dict,
        max_clients: int = 64,
        min_interval_s: float = 0.1,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        allowed_hosts: Iterable[str] = (),
        memory: MemoryView | None = None,
    ) -> None:
        """``memory``: the memory view's routes (``/api/memory...``; none: those are 404)."""
        self.aggregator = aggregator
        self.memory = memory
        self._host, self._port = host, port
        #: the Host names answered besides loopback (CTXBUS_DASHBOARD_ALLOWED_HOSTS, --allowed-host)
        self._allowed = allowed_set(allowed_hosts)
        self._bound = bound_name(host)
        #: extra facts for the page (the feed's status), called for every snapshot
        self.status = status
        self._max_clients = max_clients
        self._min_interval = min_interval_s
        self._refresh = refresh_s
        self._clock = clock
        self._assets = load_assets()
        self._server: asyncio.Server | None = None
        self._clients: set[_Client] = set()
        self._closing = asyncio.Event()
        self._connections: set[asyncio.Task[Any]] = set()
        #: moves on every notify(); a snapshot is recomputed for a view only when it moved
        self._epoch = 0
        self._cache: dict[tuple[str | None, int], tuple[int, float, bytes]] = {}
        self.port = port

    @property
    def clients(self) -> int:
        """Open event streams."""
        return len(self._clients)

    @property
    def connections(self) -> int:
        """Open connections of any kind."""
        return len(self._connections)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening, end the open streams, and wait (briefly) for the connections to finish."""
        self._closing.set()
        if self._server is not None:
            self._server.close()
        if self._connections:
            _, late = await asyncio.wait(list(self._connections), timeout=WRITE_TIMEOUT_S)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)
        if self._server is not None:
            await self._server.wait_closed()

    def notify(self) -> None:
        """The data changed: every stream sends a fresh snapshot (coalesced per client)."""
        self._epoch += 1
        for client in self._clients:
            client.wake.set()

    def snapshot(self, project: str | None, rows: int) -> bytes:
        """The view's snapshot as JSON bytes, computed at most once per change (and per second)."""
        key = (project, rows)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] == self._epoch and now - cached[1] < 1.0:
            return cached[2]
        started = time.perf_counter()
        snap = self.aggregator.snapshot(now=now, project=project, rows=rows)
        snap["feed"] = self.status()
        snap["clients"] = len(self._clients)
        snap["build_ms"] = round((time.perf_counter() - started) * 1000.0, 2)
        body = json.dumps(snap, separators=(",", ":")).encode()
        if len(self._cache) > 4 * self._max_clients:  # views nobody watches any more
            self._cache.clear()
        self._cache[key] = (self._epoch, now, body)
        return body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            try:
                request = await asyncio.wait_for(read_request(reader), READ_TIMEOUT_S)
            except BadRequest as exc:
                await self._send(writer, json_response(exc.status, {"error": str(exc)}))
                return
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                return  # the client went away or never finished
            await self._route(request, reader, writer)
        except (ConnectionError, TimeoutError, OSError):
            pass  # a client that vanished mid-answer
        except asyncio.CancelledError:
            if not self._closing.is_set():
                raise  # cancelled by stop() after its grace period: the connection just ends
        except Exception:
            log.exception("dashboard_request_failed")
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _route(self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not host_allowed(request.host, port=self.port, allowed=self._allowed, bound=self._bound):
            log.warning("dashboard_host_refused", host=(request.host or "")[:200], path=request.path[:200])
            await self._send(writer, json_response(403, {"error": HOST_REFUSED.format(host=request.host)}))
            return
        if request.path.startswith("/api/memory") and self.memory is not None:
            await self._send(writer, json_response(*await self.memory.route(request, reader)))
            return
        if request.method != "GET":
            await self._send(writer, json_response(405, {"error": "only GET"}))
            return
        asset = self._assets.get(request.path)
        if asset is not None:
            await self._send(writer, response(200, *asset))
            return
        if request.path == "/healthz":
            await self._send(writer, json_response(200, {"ok": True, "clients": len(self._clients)}))
            return
        if request.path == "/api/injection":
            await self._send(writer, self._inspection(request.query))
            return
        if request.path not in {"/api/snapshot", "/api/events"}:
            await self._send(writer, json_response(404, {"error": f"no such page {request.path}"}))
            return
        try:
            project, rows = _view(request.query)
        except BadRequest as exc:
            await self._send(writer, json_response(exc.status, {"error": str(exc)}))
            return
        if request.path == "/api/snapshot":
            await self._send(writer, response(200, self.snapshot(project, rows), "application/json"))
        else:
            await self._stream(_Client(project, rows), reader, writer)

    def _inspection(self, query: dict[str, str]) -> bytes:
        """One injection opened (``?id=CORRELATION_ID``): 404 when the chain is not (or no longer) kept."""
        correlation_id = query.get("id", "").strip()
        if not correlation_id or len(correlation_id) > 100:
            return json_response(400, {"error": "give the injection's correlation id: /api/injection?id=..."})
        doc = self.aggregator.inspections.get(correlation_id)
        if doc is None:
            return json_response(404, {"error": f"injection {correlation_id} is not kept (too old, or not read yet)"})
        return json_response(200, doc)

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)

    async def _stream(self, client: _Client, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._clients) >= self._max_clients:
            await self._send(writer, json_response(503, {"error": f"{self._max_clients} streams are open already"}))
            return
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            f"{SECURITY_HEADERS}Connection: keep-alive\r\n\r\nretry: 2000\n\n"
        )
        self._clients.add(client)
        gone = asyncio.ensure_future(self._until_gone(reader))
        try:
            await self._send(writer, head.encode("latin-1"))
            last_sent = 0.0
            while not gone.done():
                epoch = self._epoch
                wait = self._min_interval - (time.monotonic() - last_sent)
                if wait > 0:  # coalesce: at most one snapshot per interval
                    await asyncio.wait({gone}, timeout=wait)
                    if gone.done():
                        break
                client.wake.clear()
                body = self.snapshot(client.project, client.rows)
                await self._send(writer, b"event: snapshot\nid: %d\ndata: %s\n\n" % (epoch, body))
                last_sent = time.monotonic()
                woken = asyncio.ensure_future(client.wake.wait())
                await asyncio.wait({woken, gone}, timeout=self._refresh, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
        finally:
            gone.cancel()
            self._clients.discard(client)

    async def _until_gone(self, reader: asyncio.StreamReader) -> None:
        """Returns when the client closes its side or the server stops."""
        eof = asyncio.ensure_future(_closed(reader))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({eof, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            eof.cancel()
            closing.cancel()


async def _closed(reader: asyncio.StreamReader) -> None:
    """Returns when the client closes its side (anything it sends on an event stream is ignored)."""
    while await reader.read(1024):
        pass


def _view(query: dict[str, str]) -> tuple[str | None, int]:
    project = query.get("project") or None
    try:
        rows = int(query.get("rows") or DEFAULT_ROWS)
    except ValueError:
        raise BadRequest(400, "rows must be a number") from None
    if not 1 <= rows <= MAX_ROWS:
        raise BadRequest(400, f"rows must be within 1..{MAX_ROWS}")
    return project, rows


async def run_dashboard(
    config: KafkaClientConfig,
    topics: Topics,
    stop: asyncio.Event,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    group_id: str | None = None,
    backlog: int = DEFAULT_BACKLOG,
    on_ready: Callable[[DashboardServer, DashboardFeed], None] | None = None,
    aggregator: Aggregator | None = None,
    allowed_hosts: Iterable[str] = (),
    memory: MemoryView | None = None,
) -> None:
    """Serve the dashboard until ``stop``; ``on_ready`` gets the server (its bound port) and the feed."""
    agg = aggregator or Aggregator()
    server = DashboardServer(agg, host=host, port=port, allowed_hosts=allowed_hosts, memory=memory)
    feed = DashboardFeed(config, topics, agg, group_id=group_id, backlog=backlog, on_update=server.notify)
    server.status = feed.status.as_dict
    await server.start()
    log.info("dashboard_listening", host=host, port=server.port, group=feed.status.group_id)
    consuming = asyncio.create_task(feed.run(stop))
    try:
        if on_ready is not None:
            on_ready(server, feed)
        await stop.wait()
    finally:
        await server.stop()
        stop.set()
        await consuming
