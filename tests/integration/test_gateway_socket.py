"""The gateway's Unix socket, ``DATA_DIR/gateway.sock``, on the real gateway, pipeline and broker: private (0600 in
a 0700 data dir), admitting nothing without the secret, the way the hook client goes when it is there, and TCP
when it is not (absent, or stale after a killed gateway)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.topics import Topics
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .conftest import isolated_settings
from .test_hooks import context_of, make_repo, prompt_input, run_hook

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class SocketGateway:
    port: int
    data_dir: Path
    secret: str
    repo: Path

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "gateway.sock"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A data dir with a short path: a Unix socket's path has at most 107 bytes, pytest's tmp_path may be longer."""
    with tempfile.TemporaryDirectory(prefix="cbs", dir="/tmp") as path:
        yield Path(path) / "data"


@contextlib.asynccontextmanager
async def running_gateway(
    settings: Settings, kafka: KafkaClientConfig, embedder: Embedder, tmp_path: Path, short_dir: Path
) -> AsyncIterator[SocketGateway]:
    """The services and the gateway, its data dir (and socket) in ``short_dir``; the repository is acme/web's."""
    repo = make_repo(tmp_path)
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project="acme/web").items, embedder, store)
    gw = settings.model_copy(
        update={"data_dir": short_dir, "gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=6_000)}
    )
    metrics, stop, ready, ports = Metrics(), asyncio.Event(), asyncio.Event(), []
    shared = Resources(settings, metrics, embedder, store)
    services = asyncio.create_task(run_services(SERVICES, settings, kafka, metrics, stop, shared, on_ready=ready.set))
    gateway = asyncio.create_task(run_gateway(gw, kafka, metrics, stop, on_ready=ports.append))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        await asyncio.sleep(0.05)
    found = SocketGateway(ports[0], short_dir, (short_dir / "gateway.secret").read_text().strip(), repo)
    try:
        yield found
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)
    assert not found.socket_path.exists()  # a stopped gateway takes its socket with it


@pytest.fixture
async def gateway(
    settings: Settings, kafka: KafkaClientConfig, embedder: Embedder, topics: Topics, tmp_path: Path, short_dir: Path
) -> AsyncIterator[SocketGateway]:
    """A gateway of the test's own (for a test that changes what is in its data dir)."""
    async with running_gateway(settings, kafka, embedder, tmp_path, short_dir) as found:
        yield found


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_gateway(
    broker: EmbeddedBroker, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SocketGateway]:
    """One gateway for the module's tests that only send it requests (its own settings, topics and data dir):
    one stack started instead of one per test."""
    tmp = tmp_path_factory.mktemp("socket-gateway")
    settings = isolated_settings(broker, tmp)
    kafka = KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=True)
    await ensure_topics(kafka, Topics(settings.topic_prefix).all(), partitions=3, replication=1)
    with tempfile.TemporaryDirectory(prefix="cbs", dir="/tmp") as path:
        async with running_gateway(settings, kafka, embedder, tmp, Path(path) / "data") as found:
            yield found


#: the async tests on the shared gateway run in its event loop (where its services run)
in_its_loop = pytest.mark.asyncio(loop_scope="module")
#: the module's tests on one worker (under xdist), so that one stack serves them
one_worker = pytest.mark.xdist_group("gateway-socket")


def over_socket(path: Path, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    """One raw HTTP/1.1 request over the Unix socket; (status, JSON answer)."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = f"POST /v1/hooks HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n{lines}\r\n"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(15)
        sock.connect(str(path))
        sock.sendall(head.encode() + body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def client_env(gateway: SocketGateway, tmp_path: Path, **extra: str) -> dict[str, str]:
    """No CTXBUS_GATEWAY_URL: the client finds the gateway through its data dir (socket, else runtime/port)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        HOME=str(tmp_path / "home"),
        CTXBUS_DATA_DIR=str(gateway.data_dir),
        CTXBUS_HOOK_TIMEOUT_MS="6000",
        CTXBUS_HOOK_LOG_FILE=str(tmp_path / "hook.log"),
        **extra,
    )
    return env


@one_worker
def test_the_socket_is_private(shared_gateway: SocketGateway) -> None:
    gateway = shared_gateway
    mode = gateway.socket_path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(gateway.data_dir.stat().st_mode) == 0o700


@in_its_loop
@one_worker
async def test_over_the_socket_the_secret_is_still_required(shared_gateway: SocketGateway) -> None:
    gateway = shared_gateway
    body = prompt_input(gateway.repo)
    status, answer = await asyncio.to_thread(over_socket, gateway.socket_path, body, {})
    assert status == 401 and "secret" in answer["error"]
    wrong = {"Authorization": "Bearer " + "x" * 43}
    status, _ = await asyncio.to_thread(over_socket, gateway.socket_path, body, wrong)
    assert status == 401
    page = {"Authorization": f"Bearer {gateway.secret}", "Origin": "http://evil.example"}
    status, _ = await asyncio.to_thread(over_socket, gateway.socket_path, body, page)
    assert status == 403
    status, answer = await asyncio.to_thread(
        over_socket, gateway.socket_path, body, {"Authorization": f"Bearer {gateway.secret}"}
    )
    assert status == 200
    assert "Password reset revokes sessions" in answer["hookSpecificOutput"]["additionalContext"]


@in_its_loop
@one_worker
async def test_the_hook_client_goes_over_the_socket(shared_gateway: SocketGateway, tmp_path: Path) -> None:
    gateway = shared_gateway
    # nothing points the client at the TCP port (no runtime file here, a port nobody listens on): the socket alone
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        env = client_env(gateway, tmp_path, CTXBUS_GATEWAY_PORT=str(unused.getsockname()[1]))
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(gateway.repo), gateway.repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert not (tmp_path / "hook.log").exists()  # answered by the pipeline: no fallback, nothing to report


@one_worker
async def test_without_the_socket_the_client_falls_back_to_tcp(gateway: SocketGateway, tmp_path: Path) -> None:
    # its own gateway: it removes the socket and puts a stale one in its place
    env = client_env(gateway, tmp_path, CTXBUS_GATEWAY_PORT=str(gateway.port))
    gateway.socket_path.unlink()  # absent
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(gateway.repo), gateway.repo)
    assert "### Password reset revokes sessions" in context_of(done)
    stale = socket.socket(socket.AF_UNIX)  # stale: a socket file nobody listens on (a killed gateway's)
    stale.bind(str(gateway.socket_path))
    stale.close()
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(gateway.repo), gateway.repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert not (tmp_path / "hook.log").exists()
    gateway.socket_path.unlink()  # not the gateway's own: it leaves it be at stop (checked by the fixture)
