"""How the lean hook client reaches the gateway: one raw HTTP/1.1 POST, over the gateway's Unix socket
(``DATA_DIR/gateway.sock``) when it answers there, else over TCP loopback.

C modules only: ``_socket`` instead of ``socket`` (which imports ``enum``, ``selectors`` and more), and a
numeric address connected directly, never resolved (``socket.create_connection`` resolves even
``127.0.0.1`` through ``getaddrinfo``, which imports the ``idna`` codec and ``unicodedata``). A host name
(``CTXBUS_GATEWAY_URL=http://gateway:9470``) is resolved with the ``socket`` module, on that rare path only.

The socket is tried only when no ``CTXBUS_GATEWAY_URL`` names the gateway. Nothing has been sent when the
socket cannot be connected (no file, a stale one left by a killed gateway, a path too long for a Unix
socket): the call then goes over TCP, so no request is ever sent twice.
"""

import _socket
import os
import time

#: the gateway's Unix socket in the data dir (mode 0600, the data dir 0700); the secret is still required
SOCKET_FILE = "gateway.sock"
DEFAULT_GATEWAY_PORT = 9470
#: longest path a Unix socket can have (sun_path, its terminating NUL excluded)
MAX_SOCKET_PATH = 107


class GatewayRefused(ValueError):
    """The gateway would not handle the call (no secret, a wrong one, a refused Host): logged as such."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"gateway refused the call ({status}): {detail}")
        self.status = status
        self.detail = detail


def socket_path(data_dir: str) -> str:
    return os.path.join(data_dir, SOCKET_FILE)


def tcp_address(env: dict[str, str], data_dir: str) -> tuple[str, int]:
    """``CTXBUS_GATEWAY_URL``'s host and port, else the running gateway's port from ``runtime.json``, else
    ``CTXBUS_GATEWAY_PORT`` (9470) on 127.0.0.1."""
    url = env.get("CTXBUS_GATEWAY_URL", "").strip()
    if url:
        hostport = url.split("://", 1)[-1].split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        return (host or "127.0.0.1"), int(port)
    try:
        with open(os.path.join(data_dir, "runtime.json"), encoding="utf-8") as fh:
            return "127.0.0.1", runtime_gateway_port(fh.read())
    except (OSError, ValueError):
        return "127.0.0.1", int(env.get("CTXBUS_GATEWAY_PORT") or DEFAULT_GATEWAY_PORT)


def runtime_gateway_port(text: str) -> int:
    """``"gateway_port": N`` from the runtime file, read without json."""
    key = '"gateway_port":'
    at = text.index(key) + len(key)
    digits = text[at:].lstrip().split(",", 1)[0].split("}", 1)[0].strip()
    return int(digits)


def _numeric_family(name: str) -> int | None:
    for family in (_socket.AF_INET, _socket.AF_INET6):
        try:
            _socket.inet_pton(family, name)
        except OSError:
            continue
        return family
    return None


def connect_tcp(host: str, port: int, timeout_s: float) -> _socket.socket:
    name = host.strip("[]")
    family = _numeric_family(name)
    if family is None:  # a host name: resolved, and each of its addresses tried
        import socket  # noqa: PLC0415  (rare: costs a few ms)

        return socket.create_connection((name, port), timeout=timeout_s)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect((name, port))
    except BaseException:
        sock.close()
        raise
    return sock


def connect_unix(path: str, timeout_s: float) -> _socket.socket:
    if len(path.encode("utf-8", "surrogateescape")) > MAX_SOCKET_PATH:
        raise OSError(f"{path} is too long for a Unix socket")
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def connect(env: dict[str, str], data_dir: str, timeout_s: float) -> tuple[_socket.socket, str]:
    """A connection to the gateway and the ``Host`` to name: its Unix socket when no CTXBUS_GATEWAY_URL is set
    and it accepts, else TCP. OSError when neither can be reached."""
    if not env.get("CTXBUS_GATEWAY_URL", "").strip():
        try:
            return connect_unix(socket_path(data_dir), timeout_s), "localhost"
        except OSError:  # nothing sent yet: TCP
            pass
    host, port = tcp_address(env, data_dir)
    name = host.strip("[]")
    shown = f"[{name}]" if ":" in name else name
    return connect_tcp(host, port, timeout_s), f"{shown}:{port}"


def exchange(sock: _socket.socket, request: bytes, deadline: float) -> bytes:
    """Send ``request``, read until the server closes or ``deadline`` (time.monotonic()) passes (TimeoutError)."""
    sock.sendall(request)
    chunks: list[bytes] = []
    while True:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def post(
    env: dict[str, str], data_dir: str, body: bytes, event: str, timeout_s: float, budget_ms: int, headers: str = ""
) -> bytes:
    """POST /v1/hooks; the answer's body (a JSON object). ``headers``: more header lines, CRLF-terminated (the
    secret, the caller's project and cwd: hooks.wire). GatewayRefused on 401/403, ValueError on any other
    answer but a 200 with a JSON object, OSError when the gateway cannot be reached in time."""
    deadline = time.monotonic() + timeout_s
    sock, host = connect(env, data_dir, timeout_s)
    try:
        head = (
            f"POST /v1/hooks HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Ctxbus-Timeout-Ms: {budget_ms}\r\nX-Ctxbus-Hook-Event: {event}\r\n"
            f"{headers}Connection: close\r\n\r\n"
        )
        raw = exchange(sock, head.encode("latin-1") + body, deadline)
    finally:
        sock.close()
    head_bytes, _, payload = raw.partition(b"\r\n\r\n")
    status = head_bytes.split(b" ", 2)[1] if head_bytes.count(b" ") >= 1 else b""
    if status in (b"401", b"403"):
        raise GatewayRefused(int(status), payload[:500].decode("utf-8", "replace"))
    if status != b"200" or not payload.startswith(b"{"):
        raise ValueError(f"gateway answered {head_bytes[:80]!r}")
    return payload
