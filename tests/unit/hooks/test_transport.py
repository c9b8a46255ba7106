"""How the lean hook client reaches the gateway: its Unix socket first, TCP when the socket is absent, stale or
overridden by CTXBUS_GATEWAY_URL; the same request either way; never a request sent twice. Real sockets, a tiny
threaded listener standing in for the gateway (the real one: tests/integration/test_gateway_socket.py)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.gateway.unix_socket import bind_private
from ctxbus.hooks import transport

ANSWER = b'{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ok"}}'


class Listener:
    """Accepts connections on one socket; keeps each request's head; answers each with a hook answer."""

    def __init__(self, server: socket.socket) -> None:
        self.server = server
        self.server.listen(8)
        self.heads: list[dict[str, str]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head: dict[str, str] = {}
                for line in data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    head[name.strip().lower()] = value.strip()
                self.heads.append(head)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def data_dir() -> Iterator[str]:
    """A data dir with a short path (a Unix socket path has at most 107 bytes; pytest's tmp_path can be longer)."""
    with tempfile.TemporaryDirectory(prefix="cbt", dir="/tmp") as path:
        yield path


@pytest.fixture
def tcp() -> Iterator[Listener]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    listener = Listener(server)
    yield listener
    listener.close()


def unix_listener(data_dir: str) -> Listener:
    return Listener(bind_private(transport.socket_path(data_dir)).sock)


def env_for(tcp: Listener, **extra: str) -> dict[str, str]:
    return {"CTXBUS_GATEWAY_PORT": str(tcp.server.getsockname()[1]), **extra}


def post(env: dict[str, str], data_dir: str) -> bytes:
    return transport.post(env, data_dir, b"{}", "UserPromptSubmit", 5.0, 4_000, "Authorization: Bearer s3cret\r\n")


def test_the_client_prefers_the_unix_socket_and_sends_the_same_request(data_dir: str, tcp: Listener) -> None:
    unix = unix_listener(data_dir)
    try:
        assert post(env_for(tcp), data_dir) == ANSWER
    finally:
        unix.close()
    assert tcp.heads == [] and len(unix.heads) == 1
    head = unix.heads[0]
    assert head["authorization"] == "Bearer s3cret"  # the socket is private, and the secret still goes
    assert head["host"] == "localhost" and head["x-ctxbus-hook-event"] == "UserPromptSubmit"
    assert head["x-ctxbus-timeout-ms"] == "4000" and head["content-length"] == "2"


def test_without_a_socket_file_the_client_uses_tcp(data_dir: str, tcp: Listener) -> None:
    assert post(env_for(tcp), data_dir) == ANSWER
    assert len(tcp.heads) == 1 and tcp.heads[0]["authorization"] == "Bearer s3cret"
    assert tcp.heads[0]["host"] == f"127.0.0.1:{tcp.server.getsockname()[1]}"


def test_a_stale_socket_file_sends_the_client_to_tcp(data_dir: str, tcp: Listener) -> None:
    stale = socket.socket(socket.AF_UNIX)  # what a killed gateway leaves: a socket file nobody listens on
    stale.bind(transport.socket_path(data_dir))
    stale.close()
    assert stat.S_ISSOCK(os.stat(transport.socket_path(data_dir)).st_mode)
    assert post(env_for(tcp), data_dir) == ANSWER
    assert len(tcp.heads) == 1


def test_an_explicit_gateway_url_is_used_even_with_a_socket(data_dir: str, tcp: Listener) -> None:
    unix = unix_listener(data_dir)
    try:
        url = f"http://127.0.0.1:{tcp.server.getsockname()[1]}"
        assert post({"CTXBUS_GATEWAY_URL": url}, data_dir) == ANSWER
    finally:
        unix.close()
    assert unix.heads == [] and len(tcp.heads) == 1


def test_a_host_name_is_resolved(data_dir: str, tcp: Listener) -> None:
    url = f"http://localhost:{tcp.server.getsockname()[1]}"
    try:
        assert post({"CTXBUS_GATEWAY_URL": url}, data_dir) == ANSWER
    except ConnectionRefusedError:  # localhost resolving to ::1 first on a host without IPv4 localhost
        pytest.skip("localhost does not reach 127.0.0.1 here")
    assert tcp.heads[0]["host"] == f"localhost:{tcp.server.getsockname()[1]}"


def test_a_data_dir_too_long_for_a_socket_goes_over_tcp(tcp: Listener, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    with pytest.raises(OSError, match="longer than a Unix socket path"):
        bind_private(transport.socket_path(str(deep)))
    assert post(env_for(tcp), str(deep)) == ANSWER


def test_nobody_listening_anywhere_is_an_os_error(data_dir: str) -> None:
    with socket.socket() as unused:  # bound, never listening: connections to it are refused
        unused.bind(("127.0.0.1", 0))
        with pytest.raises(OSError):
            post({"CTXBUS_GATEWAY_PORT": str(unused.getsockname()[1])}, data_dir)


def test_the_gateway_socket_is_private_from_its_first_moment_and_removed_only_if_its_own(data_dir: str) -> None:
    path = transport.socket_path(data_dir)
    bound = bind_private(path)
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert sorted(os.listdir(data_dir)) == ["gateway.sock"]  # the temporary name is gone
    second = bind_private(path)  # a new gateway replaces the old socket in one step
    bound.remove()  # the first gateway stopping leaves the second one's socket alone
    assert os.path.exists(path)
    second.remove()
    assert not os.path.exists(path)
    bound.sock.close()
    second.sock.close()


def test_the_fast_path_imports_no_socket_signal_enum_or_idna(data_dir: str, tcp: Listener) -> None:
    """The hook process's own cost is its imports: the fast path uses the C modules only (measured: `socket` and
    `signal` with `enum` nearly doubled a bare interpreter's start; resolving 127.0.0.1 loaded the idna codec)."""
    code = (
        "import sys, io; from ctxbus.hooks import client; "
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b'{}')); client.main(['user-prompt-submit']); "
        "print(sorted(m for m in ('socket', 'signal', 'enum', 'encodings.idna', 'json', 're') if m in sys.modules), "
        "file=sys.stderr)"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "CTXBUS_DATA_DIR": data_dir,
        **env_for(tcp),
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=True)
    assert done.stdout == ANSWER
    assert done.stderr.strip().splitlines()[-1] == b"[]"
