"""The gateway admits only its own (issue 10, findings 4, 5 and 8): a real gateway with the library routes (as
``ctxbus up`` runs it) on the real broker, pipeline and store.

Refused: no secret or a wrong one (401), a browser ``Origin`` or a foreign ``Host`` (403, before anything else).
Accepted: the installation's secret from its data dir. The project is the client's; a hook without a cwd gets an
empty context with a reason; malformed bodies are a 400, never a 500."""

from __future__ import annotations

import asyncio
import json
import stat
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
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
from ctxbus.hooks.project import project_for
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, VectorStore
from ctxbus.settings import GatewaySettings, HookSettings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .conftest import isolated_settings
from .kafka_io import read_all
from .slack import ROOMY_HOOK_MS
from .test_hooks import context_of, hook_env, make_repo, prompt_input, run_hook

#: one gateway for the module (its fixture), in the module's event loop, on one xdist worker
pytestmark = [
    pytest.mark.integration,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.xdist_group("gateway-trust"),
]


def call(
    port: int, path: str, body: bytes | None, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, Any]:
    """One request to the gateway; (status, JSON answer)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}


@dataclass(frozen=True)
class Gateway:
    port: int
    secret: str
    repo: Path
    store: VectorStore
    data_dir: Path
    kafka: KafkaClientConfig
    topics: Topics


#: the hook's budget here, the gateway's cap and the client's timeout alike
HOOK_TIMEOUT_MS = ROOMY_HOOK_MS


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(
    broker: EmbeddedBroker, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    """Services and the gateway sharing one store (the library routes served), as ``ctxbus up`` runs them; the
    secret is the one the gateway made in its data dir; the repository is project acme/web. One for the module:
    its tests only send it requests (each writes its hook log to its own tmp_path, and what one stores is in a
    project of its own)."""
    tmp = tmp_path_factory.mktemp("trust")
    settings = isolated_settings(broker, tmp)
    kafka = KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=True)
    topics = Topics(settings.topic_prefix)
    await ensure_topics(kafka, topics.all(), partitions=3, replication=1)
    repo = make_repo(tmp)
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project="acme/web").items, embedder, store)
    gw = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=HOOK_TIMEOUT_MS)}
    )
    metrics, stop, ready, ports = Metrics(), asyncio.Event(), asyncio.Event(), []
    shared = Resources(settings, metrics, embedder, store)
    services = asyncio.create_task(run_services(SERVICES, settings, kafka, metrics, stop, shared, on_ready=ready.set))
    gateway = asyncio.create_task(run_gateway(gw, kafka, metrics, stop, on_ready=ports.append, resources=shared))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        await asyncio.sleep(0.05)
    secret_file = settings.data_dir / "gateway.secret"  # made by the gateway (each test checks what it needs)
    secret = secret_file.read_text().strip() if secret_file.exists() else ""
    try:
        yield Gateway(ports[0], secret, repo, store, settings.data_dir, kafka, topics)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)


def client_env(gateway: Gateway, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The hook client's environment: this gateway, its data dir (where the gateway made its secret), the test's
    own hook log (``hook_log``) and a timeout a busy machine keeps (``HOOK_TIMEOUT_MS``)."""
    env = hook_env(
        tmp_path,
        CTXBUS_HOOK_LOG_FILE=str(hook_log(tmp_path)),
        CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{gateway.port}",
        CTXBUS_HOOK_TIMEOUT_MS=str(HOOK_TIMEOUT_MS),
        **extra,
    )
    return env | {"CTXBUS_DATA_DIR": str(gateway.data_dir)}


def hook_log(tmp_path: Path) -> Path:
    """Where the hook client of this test logs (nothing when the pipeline answered)."""
    return tmp_path / "hook.log"


# --- the secret --------------------------------------------------------------------------------------------


async def test_the_secret_file_is_private(gateway: Gateway) -> None:
    path = gateway.data_dir / "gateway.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(gateway.data_dir.stat().st_mode) == 0o700
    assert path.read_text().strip() == gateway.secret and len(gateway.secret) >= 32


def _body(path: str, repo: Path) -> bytes:
    if path == "/v1/hooks":
        return prompt_input(repo)
    if path == "/v1/search":
        return json.dumps({"project": "acme/web", "queries": [{"id": 1, "query": "password reset"}]}).encode()
    return json.dumps({"project": "acme/web", "description": "Fix login after password reset"}).encode()


@pytest.mark.parametrize("path", ["/v1/hooks", "/v1/search", "/v1/prime"])
async def test_every_endpoint_needs_the_secret(gateway: Gateway, path: str) -> None:
    port, secret, body = gateway.port, gateway.secret, _body(path, gateway.repo)
    json_type = {"Content-Type": "application/json"}
    status, answer = await asyncio.to_thread(call, port, path, body, json_type)
    assert status == 401 and "secret" in answer["error"]
    wrong = secret[:-1] + ("a" if secret[-1] != "a" else "b")
    assert (await asyncio.to_thread(call, port, path, body, bearer(wrong)))[0] == 401
    assert (await asyncio.to_thread(call, port, path, body, {**json_type, "X-Ctxbus-Token": wrong}))[0] == 401
    assert (await asyncio.to_thread(call, port, path, body, {**json_type, "Authorization": secret}))[0] == 401
    status, answer = await asyncio.to_thread(call, port, path, body, bearer(secret))
    assert status == 200, answer
    if path == "/v1/search":
        assert answer["results"][0]["items"][0]["id"] == "reset-revokes"
    status, _ = await asyncio.to_thread(call, port, path, body, {**json_type, "X-Ctxbus-Token": secret})
    assert status == 200
    # /healthz stays open (nothing behind it)
    assert await asyncio.to_thread(call, port, "/healthz", None, None, "GET") == (200, {"status": "ok"})


async def test_a_web_page_is_refused_even_with_the_secret(gateway: Gateway) -> None:
    """A text/plain POST from a page (Origin set) and DNS rebinding (a foreign Host): 403, nothing done (no test
    of this module sends a session's end: its outcome could only come from here)."""
    port, secret, kafka, topics = gateway.port, gateway.secret, gateway.kafka, gateway.topics
    end = json.dumps({"hook_event_name": "SessionEnd", "session_id": "evil", "cwd": "/", "reason": "x"}).encode()
    page = {"Content-Type": "text/plain", "Origin": "http://evil.example"}
    status, answer = await asyncio.to_thread(call, port, "/v1/hooks", end, page)
    assert status == 403 and "Origin" in answer["error"]
    for refused in (
        {**bearer(secret), "Origin": "http://evil.example"},
        {**bearer(secret), "Origin": "null"},
        {**bearer(secret), "Host": f"evil.example:{port}"},
        {**bearer(secret), "Host": f"127.0.0.1:{port + 1}"},
        {**bearer(secret), "Host": "127.0.0.1.evil.example"},
    ):
        status, answer = await asyncio.to_thread(call, port, "/v1/hooks", end, refused)
        assert status == 403, refused
    assert "Host" in answer["error"]
    assert await read_all(kafka, topics.outcome_recorded, expect=1, timeout_s=3) == []
    search = _body("/v1/search", gateway.repo)
    for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}", "localhost"):
        status, answer = await asyncio.to_thread(call, port, "/v1/search", search, {**bearer(secret), "Host": host})
        assert status == 200, (host, answer)


# --- the hook client ---------------------------------------------------------------------------------------


async def test_the_hook_client_sends_the_secret(gateway: Gateway, tmp_path: Path) -> None:
    repo = gateway.repo
    env = client_env(gateway, tmp_path)  # its data dir holds the secret
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo), repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert not hook_log(tmp_path).exists()  # answered by the pipeline, nothing to report
    # the secret from the environment instead (how a compose gateway's clients get it)
    env_secret = {**env, "CTXBUS_DATA_DIR": str(tmp_path / "elsewhere"), "CTXBUS_GATEWAY_SECRET": gateway.secret}
    done, _ = await asyncio.to_thread(run_hook, env_secret, "user-prompt-submit", prompt_input(repo), repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert not hook_log(tmp_path).exists()
    # a client without the secret is refused and says so in its log (the pattern file answers)
    other = {**env, "CTXBUS_DATA_DIR": str(tmp_path / "other")}
    done, _ = await asyncio.to_thread(run_hook, other, "user-prompt-submit", prompt_input(repo), repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert "401" in hook_log(tmp_path).read_text()


async def test_the_project_is_the_clients_not_the_gateways(
    gateway: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"  # no repository, no configuration: only the client's CTXBUS_PROJECT names acme/web
    plain.mkdir()
    monkeypatch.setenv("CTXBUS_PROJECT", "someone/else")  # the gateway's own environment must not count
    env = client_env(gateway, tmp_path, CTXBUS_PROJECT="acme/web")
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(plain), plain)
    assert "### Password reset revokes sessions" in context_of(done)
    # without the client's CTXBUS_PROJECT the plain directory is its own project
    monkeypatch.setenv("CTXBUS_PROJECT", "acme/web")
    env.pop("CTXBUS_PROJECT")
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(plain), plain)
    assert "Password reset" not in context_of(done)


async def test_long_paths_sharing_a_prefix_are_different_projects(
    gateway: Gateway, tmp_path: Path, embedder: Embedder
) -> None:
    base = tmp_path / ("d" * 120) / ("e" * 120)
    repo_a, repo_b = base / "repo-a", base / "repo-b"
    for repo in (repo_a, repo_b):
        (repo / ".git").mkdir(parents=True)
    project_a, project_b = project_for(str(repo_a), env={}), project_for(str(repo_b), env={})
    assert project_a != project_b and len(project_a) <= 200 and len(project_b) <= 200
    item = MemoryItem(
        id="a-only", project=project_a, kind=MemoryKind.WARNING, content="In repo-a a password reset revokes tokens."
    )
    await asyncio.to_thread(ingest, [item], embedder, gateway.store)
    env = client_env(gateway, tmp_path)
    prompt = "Password reset should revoke the refresh tokens"
    done_a, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo_a, prompt), repo_a)
    done_b, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo_b, prompt), repo_b)
    assert "In repo-a a password reset" in context_of(done_a)
    assert "In repo-a" not in context_of(done_b)


async def test_a_hook_without_cwd_gets_an_empty_context_with_a_reason(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(gateway.repo)  # the gateway's own working directory must not become the hook's project
    body = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "password reset"})
    status, answer = await asyncio.to_thread(call, gateway.port, "/v1/hooks", body.encode(), bearer(gateway.secret))
    assert status == 200
    assert answer == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": ""}}
    logged = capsys.readouterr()
    assert "hook_without_cwd" in logged.out + logged.err


# --- malformed input: 400, never 500 -----------------------------------------------------------------------


async def test_an_over_long_project_is_a_clear_400(gateway: Gateway) -> None:
    search = json.dumps({"project": "p" * 201, "queries": [{"id": 1, "query": "password reset"}]}).encode()
    status, answer = await asyncio.to_thread(call, gateway.port, "/v1/search", search, bearer(gateway.secret))
    assert status == 400 and "201" in answer["error"] and "200" in answer["error"], answer
    prime = json.dumps({"project": "p" * 201, "description": "Fix login"}).encode()
    assert (await asyncio.to_thread(call, gateway.port, "/v1/prime", prime, bearer(gateway.secret)))[0] == 400


@pytest.mark.parametrize("path", ["/v1/hooks", "/v1/search"])
async def test_deeply_nested_json_is_a_400(gateway: Gateway, path: str) -> None:
    body = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    status, answer = await asyncio.to_thread(call, gateway.port, path, body, bearer(gateway.secret))
    assert status == 400 and "nested" in answer["error"]


async def test_a_lone_surrogate_is_replaced_not_an_empty_context(gateway: Gateway, tmp_path: Path) -> None:
    repo = gateway.repo
    env = client_env(gateway, tmp_path)
    prompt = prompt_input(repo, "Fix login after password reset \ud800 now")
    assert b"\\ud800" in prompt
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt, repo)
    assert "### Password reset revokes sessions" in context_of(done)
    raw = prompt.replace(b"\\ud800", b"\xed\xa0\x80\xff")  # invalid UTF-8 bytes too
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", raw, repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert not hook_log(tmp_path).exists()  # both answered by the pipeline


async def test_the_sub_command_that_ran_decides_the_event(gateway: Gateway, tmp_path: Path) -> None:
    repo = gateway.repo
    env = client_env(gateway, tmp_path)
    lying = json.loads(prompt_input(repo))
    lying["hook_event_name"] = "Stop"
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", json.dumps(lying).encode(), repo)
    assert "### Password reset revokes sessions" in context_of(done, "UserPromptSubmit")
    assert not hook_log(tmp_path).exists()  # the gateway's answer, not the client's fallback


async def test_a_prompt_over_4_mb_is_trimmed_not_cut(gateway: Gateway, tmp_path: Path) -> None:
    repo = gateway.repo
    env = client_env(gateway, tmp_path)
    prompt = "After a password reset, revoke the refresh tokens and clear the session cache. " * 60_000
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo, prompt), repo)
    assert "### Password reset revokes sessions" in context_of(done)
    log = [json.loads(line) for line in hook_log(tmp_path).read_text().splitlines()]
    assert [e["event"] for e in log] == ["prompt_trimmed"], log
    assert log[0]["chars"] == len(prompt) and log[0]["kept"] == 100_000
