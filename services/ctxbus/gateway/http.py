"""A small HTTP/1.1 server on asyncio streams: JSON in, JSON out, one request per connection.

Enough for loopback hook traffic (the lean hook client and Claude Code's HTTP hook
type); not a general web server.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from ctxbus.gateway.unix_socket import BoundSocket, bind_private

log = structlog.get_logger("ctxbus.gateway.http")

#: time a client may take to send its request
READ_TIMEOUT_S = 5.0
MAX_HEADER_BYTES = 16_384
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
}


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: dict[str, Any] | list[Any]
    #: called once the response is written and the connection closed: work that must not delay the answer
    after: Callable[[], None] | None = field(default=None, compare=False)


Handler = Callable[[Request], Awaitable[Response]]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_request(reader: asyncio.StreamReader, max_body: int) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEADER_BYTES:
        raise HttpError(400, "request head too large")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise HttpError(400, "malformed request line") from None
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, "bad content-length") from None
    if length < 0 or length > max_body:
        raise HttpError(413, f"body of {length} bytes is over the {max_body}-byte limit")
    body = await reader.readexactly(length) if length else b""
    return Request(method.upper(), target.split("?", 1)[0], headers, body)


def encode_response(response: Response) -> bytes:
    body = json.dumps(response.body, ensure_ascii=False).encode("utf-8")
    head = (
        f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class ListenError(RuntimeError):
    """The server cannot listen where it was told to (the port is taken, the address is not local)."""


class HttpServer:
    """Listens on ``host``:``port`` and, given ``unix_path``, on a Unix socket there too (mode 0600: see
    :mod:`ctxbus.gateway.unix_socket`); both serve the same handler."""

    def __init__(self, handler: Handler, *, host: str, port: int, max_body: int, unix_path: str | None = None) -> None:
        self._handler = handler
        self._host, self._port, self._max_body = host, port, max_body
        self._unix_path = unix_path
        self._server: asyncio.Server | None = None
        self._unix_server: asyncio.Server | None = None
        self._unix: BoundSocket | None = None
        #: the Unix socket's path once it listens (None: TCP only)
        self.unix_path: str | None = None

    async def start(self) -> int:
        """Listen (on the Unix socket first, then TCP); returns the bound port. Raises ListenError (naming host and
        port) when it cannot listen on TCP."""
        if self._unix_path is not None:
            await self._start_unix(self._unix_path)
        try:
            self._server = await asyncio.start_server(self._serve, self._host, self._port)
        except OSError as exc:
            await self.stop()
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
            raise ListenError(
                f"the gateway port {self._port} on {self._host} {reason}: set CTXBUS_GATEWAY_PORT to a free port "
                "(0 picks one; the hook client finds it in runtime.json)"
            ) from exc
        return int(self._server.sockets[0].getsockname()[1])

    async def _start_unix(self, path: str) -> None:
        """The Unix socket as well; one that cannot be made leaves the gateway on TCP alone (logged)."""
        try:
            self._unix = bind_private(path)
            self._unix_server = await asyncio.start_unix_server(self._serve, sock=self._unix.sock)
        except OSError as exc:
            log.warning("gateway_unix_socket_unavailable", path=path, error=str(exc))
            if self._unix is not None:
                self._unix.sock.close()
                self._unix.remove()
                self._unix = None
            return
        self.unix_path = path

    async def stop(self) -> None:
        for server in (self._server, self._unix_server):
            if server is not None:
                server.close()
                await server.wait_closed()
        if self._unix is not None:
            self._unix.remove()
            self._unix = None
            self.unix_path = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(read_request(reader, self._max_body), READ_TIMEOUT_S)
                response = await self._handler(request)
            except HttpError as exc:
                response = Response(exc.status, {"error": str(exc)})
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return  # the client went away or never finished: nothing to answer
            except Exception as exc:
                log.exception("gateway_handler_failed")
                response = Response(500, {"error": f"{type(exc).__name__}: {exc}"})
            writer.write(encode_response(response))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
        if response.after is not None:  # the answer is out: now the work that waited for it
            try:
                response.after()
            except Exception:
                log.exception("gateway_after_answer_failed")
