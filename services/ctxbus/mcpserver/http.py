"""``ctxbus mcp serve --http``: the MCP server over streamable HTTP, behind the gateway's own admission.

Every HTTP request passes :class:`ctxbus.gateway.admission.Admission` first, with the gateway's secret
(``DATA_DIR/gateway.secret`` or ``CTXBUS_GATEWAY_SECRET``) and allowed hosts: no ``Origin`` header (403), a loopback
``Host`` with this listener's port (403), ``Authorization: Bearer <secret>`` (401). Only then does the SDK's
streamable HTTP app (at ``/mcp``) see it. The tools reach the stack through the bus, as over stdio.
"""

from __future__ import annotations

import json
import socket
import sys

import structlog
import uvicorn
from mcp.server import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from ctxbus.gateway.admission import Admission
from ctxbus.gateway.http import HttpError, Request
from ctxbus.gateway.secret_file import gateway_secret
from ctxbus.settings import Settings

log = structlog.get_logger("ctxbus.mcp")

#: where the MCP endpoint is served
PATH = "/mcp"


class Admitted:
    """``app`` behind the gateway's checks: a refused HTTP request is answered (JSON ``{"error": ...}``, 401/403)
    and never reaches it; lifespan events pass."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self._app = app
        self._admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
            try:
                self._admission.check(Request(str(scope["method"]), str(scope["path"]), headers, b""))
            except HttpError as exc:
                log.warning("mcp_refused", path=scope["path"], status=exc.status, reason=str(exc))
                body = json.dumps({"error": str(exc)}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": exc.status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self._app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), bound before the server starts so its port is known."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def admitted_app(server: MCPServer, settings: Settings, port: int) -> Admitted:
    """The SDK's streamable HTTP app (JSON answers, no session state kept between requests) behind the admission
    of a listener on ``port``."""
    admission = Admission(gateway_secret(settings), allowed_hosts=settings.gateway.allowed_host_list, port=port)
    app = server.streamable_http_app(streamable_http_path=PATH, json_response=True, stateless_http=True)
    return Admitted(app, admission)


async def serve(server: MCPServer, settings: Settings, host: str, port: int) -> None:
    """Serve until cancelled; the address is printed on stderr once it listens (``port`` 0 picks one)."""
    sock = bind(host, port)
    bound = int(sock.getsockname()[1])
    app = admitted_app(server, settings, bound)
    shown = f"[{host}]" if ":" in host else host
    print(f"ctxbus mcp: listening on http://{shown}:{bound}{PATH}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
