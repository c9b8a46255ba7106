"""The dashboard's memory view: the items and what learning made of them, the sessions' outcomes, and forgetting.

Routes (served by :class:`~ctxbus.dashboard.server.DashboardServer` under its Host check):

- ``GET /memory`` (``memory.html``, ``/static/memory.js``): the page;
- ``GET /api/memory?project=P&kind=K&stale=1&pinned=1``: ``{"items": [rows]}``: each item with its kind,
  source, conviction, uses, outcomes, injections and the last one (read from the running stack's gateway,
  ``/v1/memory/list``: the stack's process owns the store);
- ``GET /api/memory/sessions?project=P&limit=N``: ``{"sessions": [...]}``: the latest outcomes, each with the
  items whose conviction it moved (``/v1/memory/sessions``);
- ``POST /api/memory/forget``, body ``{"project": P, "ids": [...]}``: publishes ``memory.curated`` (the store's
  owner applies it). It needs the gateway's secret (DATA_DIR/gateway.secret) in ``X-Ctxbus-Token`` or
  ``Authorization: Bearer``: none is a 401, a wrong one a 403; a browser's ``Origin`` must be this page's own.

The page asks the user for the secret once (kept in the tab's sessionStorage) and sends it with each forget.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import CurationAction, MemoryCurated
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret
from ctxbus.runtime import NoBroker, kafka_config, read_runtime
from ctxbus.settings import Settings

#: the largest forget body read, in bytes
MAX_BODY = 64 * 1024
#: most sessions one page asks for
MAX_SESSIONS = 200
#: seconds one gateway call may take
GATEWAY_TIMEOUT_S = 30.0

#: (path, JSON body) -> the gateway's JSON answer; raises GatewayError
GatewayCall = Callable[[str, dict[str, Any]], Awaitable[Any]]
#: publishes a curation event on the bus
Publish = Callable[[Envelope[MemoryCurated]], Awaitable[None]]


class GatewayError(Exception):
    """The gateway refused or could not be reached; ``status`` is what the page gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class MemoryViewError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _flag(query: dict[str, str], name: str) -> bool | None:
    value = query.get(name, "").strip().lower()
    if not value:
        return None
    if value in {"1", "true", "yes"}:
        return True
    if value in {"0", "false", "no"}:
        return False
    raise MemoryViewError(400, f"{name} must be 1 or 0")


def _presented(headers: dict[str, str]) -> str | None:
    token = headers.get("x-ctxbus-token", "").strip()
    if token:
        return token
    scheme, _, credentials = headers.get("authorization", "").strip().partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


class MemoryView:
    """``secret``: reads the installation's secret (None: there is none, so nothing can be forgotten here)."""

    def __init__(self, gateway: GatewayCall, publish: Publish, secret: Callable[[], str | None]) -> None:
        self._gateway = gateway
        self._publish = publish
        self._secret = secret

    async def items(self, query: dict[str, str]) -> dict[str, Any]:
        body: dict[str, Any] = {"project": query.get("project") or None}
        if query.get("kind"):
            body["kind"] = query["kind"]
        for name in ("stale", "pinned"):
            flag = _flag(query, name)
            if flag is not None:
                body[name] = flag
        return {"items": (await self._call("/v1/memory/list", body))["items"]}

    async def sessions(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            limit = int(query.get("limit") or 20)
        except ValueError:
            raise MemoryViewError(400, "limit must be a number") from None
        if not 1 <= limit <= MAX_SESSIONS:
            raise MemoryViewError(400, f"limit must be within 1..{MAX_SESSIONS}")
        body = {"project": query.get("project") or None, "limit": limit}
        return {"sessions": (await self._call("/v1/memory/sessions", body))["sessions"]}

    async def forget(self, headers: dict[str, str], host: str | None, body: bytes) -> dict[str, Any]:
        """Check the secret and the page's origin, then publish the forget."""
        from ctxbus.retriever.curation_record import CurationError, curation_event  # noqa: PLC0415

        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != (host or ""):
            raise MemoryViewError(403, "a forget must come from this dashboard's own page")
        presented = _presented(headers)
        if presented is None:
            raise MemoryViewError(401, "forgetting needs the gateway's secret (DATA_DIR/gateway.secret)")
        secret = self._secret()
        if secret is None or not hmac.compare_digest(presented.encode(), secret.encode()):
            raise MemoryViewError(403, "that is not the gateway's secret")
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            raise MemoryViewError(400, "the body must be JSON: {project, ids}") from None
        project, ids = (request.get("project"), request.get("ids")) if isinstance(request, dict) else (None, None)
        if not isinstance(project, str) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise MemoryViewError(400, "the body must be {project: string, ids: [string, ...]}")
        try:
            event = curation_event(project, CurationAction.FORGET, ids, source="dashboard")
        except CurationError as exc:
            raise MemoryViewError(400, str(exc)) from exc
        try:
            await self._publish(event)
        except CurationError as exc:
            raise MemoryViewError(503, str(exc)) from exc
        return {"queued": list(event.payload.ids), "project": event.project, "event_id": str(event.event_id)}

    async def route(self, request: Any, reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        """Answer a ``/api/memory...`` request (the server's ``Request``): (status, JSON body)."""
        try:
            if request.path == "/api/memory/forget":
                if request.method != "POST":
                    return 405, {"error": "POST {project, ids} with the gateway's secret"}
                body = await read_body(reader, request.headers)
                return 200, await self.forget(request.headers, request.host, body)
            if request.method != "GET":
                return 405, {"error": "only GET"}
            if request.path == "/api/memory":
                return 200, await self.items(request.query)
            if request.path == "/api/memory/sessions":
                return 200, await self.sessions(request.query)
            return 404, {"error": f"no such page {request.path}"}
        except MemoryViewError as exc:
            return exc.status, {"error": str(exc)}

    async def _call(self, path: str, body: dict[str, Any]) -> Any:
        try:
            return await self._gateway(path, body)
        except GatewayError as exc:
            raise MemoryViewError(exc.status, str(exc)) from exc


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    """A request's body (``Content-Length``, at most MAX_BODY bytes)."""
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        raise MemoryViewError(400, "Content-Length must be a number") from None
    if not 0 <= length <= MAX_BODY:
        raise MemoryViewError(400, f"the body must be at most {MAX_BODY} bytes")
    return await reader.readexactly(length) if length else b""


def stack_gateway(settings: Settings) -> GatewayCall:
    """Calls to the running stack's gateway (found by ``runtime.json``, with the data dir's secret)."""

    def post(path: str, body: dict[str, Any]) -> Any:
        runtime = read_runtime(settings)
        secret = read_secret(dict(os.environ), str(settings.data_dir))
        if runtime is None or secret is None:
            raise GatewayError(
                503, f"no running ctxbus stack with its secret in {settings.data_dir} (start `ctxbus up`)"
            )
        host = "127.0.0.1" if settings.gateway.host in ("0.0.0.0", "::", "") else settings.gateway.host
        request = urllib.request.Request(
            f"http://{host}:{runtime.gateway_port}{path}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {secret}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=GATEWAY_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise GatewayError(exc.code if exc.code < 500 else 503, f"the stack's gateway refused: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise GatewayError(503, f"cannot reach the running stack's gateway: {exc}") from exc

    async def call(path: str, body: dict[str, Any]) -> Any:
        return await asyncio.to_thread(post, path, body)

    return call


def bus_publisher(settings: Settings) -> Publish:
    """Publishes a curation on the stack's bus (the broker the dashboard reads)."""

    async def publish(event: Envelope[MemoryCurated]) -> None:
        from ctxbus.retriever.curation_record import CurationError, publish  # noqa: PLC0415

        try:
            config = kafka_config(settings)
        except NoBroker as exc:
            raise CurationError(str(exc)) from exc
        await publish(config, Topics(settings.topic_prefix), event, "dashboard")

    return publish


def memory_view(settings: Settings) -> MemoryView:
    """The view over the running stack of ``settings``' data directory."""
    return MemoryView(
        stack_gateway(settings),
        bus_publisher(settings),
        lambda: read_secret(dict(os.environ), str(settings.data_dir)),
    )
