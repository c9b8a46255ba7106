"""Claude Code's side: `ctxbus hook ...` as a fresh process, against a real gateway and pipeline,
and with everything down. It always prints valid hook output within its timeout and exits 0."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxbus.hooks
from ctxbus.adapters.broker_embedded import free_port
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.payloads import OutcomeRecorded
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .kafka_io import read_all
from .slack import assert_within

pytestmark = pytest.mark.integration

PATTERNS = {
    "version": "1.0.0",
    "patterns": [
        {
            "pattern_id": "reset-revokes",
            "domain": "auth",
            "title": "Password reset revokes sessions",
            "description": "After a password reset, revoke refresh tokens and clear the session cache.",
            "confidence": 0.92,
            "usage_count": 3,
            "success_rate": 0.9,
        },
    ],
}


def make_repo(tmp_path: Path, project: str = "acme/web") -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".claude").mkdir()
    (root / ".claude" / "ctxbus.json").write_text(json.dumps({"project": project}))
    (root / ".claude" / "learned_patterns.json").write_text(json.dumps(PATTERNS))
    return root


def hook_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(HOME=str(tmp_path / "home"), CTXBUS_DATA_DIR=str(tmp_path / "data"), **extra)
    return env


#: what ``ctxbus hooks install`` writes: the interpreter without ``site``, and the launcher file by its path
LAUNCHER = [sys.executable, "-S", str(Path(ctxbus.hooks.__file__).with_name("launch.py"))]


def run_hook(
    env: dict[str, str], slug: str, stdin: bytes, cwd: Path, *, launcher: bool = False
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """The hook as a fresh process: ``python -m ctxbus.cli.main hook SLUG``, or (``launcher``) the installed fast
    launcher with no PYTHONPATH at all, as from a fresh clone's settings file."""
    if launcher:
        env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    started = time.monotonic()
    done = subprocess.run(
        [*LAUNCHER, slug] if launcher else [sys.executable, "-m", "ctxbus.cli.main", "hook", slug],
        input=stdin,
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=60,  # a hook that hangs; the tests' budgets are far below (test_gateway_trust.py's is 20 s)
        check=False,
    )
    return done, time.monotonic() - started


def startup_s(env: dict[str, str], cwd: Path, *, launcher: bool = False) -> float:
    """How long a hook process takes here and now when it answers at once (the hook disabled): the interpreter's
    start and the hook's imports, which the hook's own timeout cannot cover (its watchdog starts in ``main``)."""
    _, elapsed = run_hook({**env, "CTXBUS_HOOK_ENABLED": "false"}, "user-prompt-submit", b"{}", cwd, launcher=launcher)
    return elapsed


def timed_hook(
    env: dict[str, str], slug: str, stdin: bytes, cwd: Path, *, launcher: bool = False
) -> tuple[subprocess.CompletedProcess[bytes], float, float]:
    """``run_hook``, with the start-up measured just before and just after it (the larger: a loaded machine's
    start-up varies from one process to the next)."""
    before = startup_s(env, cwd, launcher=launcher)
    done, elapsed = run_hook(env, slug, stdin, cwd, launcher=launcher)
    return done, elapsed, max(before, startup_s(env, cwd, launcher=launcher))


def prompt_input(cwd: Path, prompt: str = "Fix login after password reset") -> bytes:
    return json.dumps(
        {
            "session_id": "sess-9",
            "transcript_path": "/dev/null",
            "cwd": str(cwd),
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    ).encode()


def context_of(done: subprocess.CompletedProcess[bytes], event: str = "UserPromptSubmit") -> str:
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    context: str = out["hookSpecificOutput"]["additionalContext"]
    assert len(context) <= 10_000
    return context


# --- everything down -----------------------------------------------------------------------------


@pytest.mark.parametrize("launcher", [False, True])
def test_with_the_gateway_down_it_falls_back_to_the_pattern_file(tmp_path: Path, launcher: bool) -> None:
    repo = make_repo(tmp_path)
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{free_port()}", CTXBUS_HOOK_TIMEOUT_MS="2000")
    done, elapsed, startup = timed_hook(env, "user-prompt-submit", prompt_input(repo), repo, launcher=launcher)
    assert "### Password reset revokes sessions" in context_of(done)  # the fallback's, before the watchdog
    assert_within(elapsed, 2.0, startup)
    log = (tmp_path / "data" / "hook.log").read_text()
    assert "gateway_unreachable" in log and "fallback_answered" in log
    assert done.stderr == b""


@pytest.fixture
def silent_gateway() -> Iterator[int]:
    """Accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("launcher", [False, True])
def test_a_gateway_that_never_answers_still_gets_valid_output_in_time(
    tmp_path: Path, silent_gateway: int, launcher: bool
) -> None:
    repo = make_repo(tmp_path)
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{silent_gateway}", CTXBUS_HOOK_TIMEOUT_MS="800")
    done, elapsed, startup = timed_hook(env, "user-prompt-submit", prompt_input(repo), repo, launcher=launcher)
    context_of(done)  # valid, whatever it holds
    assert_within(elapsed, 0.8, startup)  # not the gateway's silence (run_hook gives up after 30 s)
    log = (tmp_path / "data" / "hook.log").read_text()
    assert "gateway_unreachable" in log or "hook_watchdog" in log  # it gave up on the gateway, by itself


@pytest.mark.parametrize(
    ("stdin", "slug"),
    [(b"{not json", "user-prompt-submit"), (b"", "session-start"), (b"[1, 2]", "user-prompt-submit")],
)
def test_malformed_input_gives_valid_empty_output(tmp_path: Path, stdin: bytes, slug: str) -> None:
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{free_port()}")
    done, _ = run_hook(env, slug, stdin, tmp_path)
    event = "SessionStart" if slug == "session-start" else "UserPromptSubmit"
    assert context_of(done, event) == ""
    assert "hook_input_invalid" in (tmp_path / "data" / "hook.log").read_text()


def test_a_huge_prompt_is_handled(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{free_port()}")
    done, _ = run_hook(env, "user-prompt-submit", prompt_input(repo, "password reset " * 400_000), repo)
    context_of(done)


@pytest.mark.parametrize("launcher", [False, True])
def test_disabled_and_outcome_hooks(tmp_path: Path, launcher: bool) -> None:
    env = hook_env(tmp_path, CTXBUS_HOOK_ENABLED="false")
    done, _ = run_hook(env, "user-prompt-submit", prompt_input(tmp_path), tmp_path, launcher=launcher)
    assert context_of(done) == ""
    down = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{free_port()}")
    stop, _ = run_hook(down, "stop", b'{"hook_event_name": "Stop", "session_id": "s"}', tmp_path, launcher=launcher)
    assert stop.returncode == 0 and json.loads(stop.stdout) == {}
    bad, _ = run_hook(down, "no-such-hook", b"{}", tmp_path, launcher=launcher)
    assert bad.returncode == 0 and json.loads(bad.stdout) == {} and b"unknown hook" in bad.stderr


@pytest.mark.parametrize("launcher", [False, True])
def test_the_seed_002_injector_contract(tmp_path: Path, launcher: bool) -> None:
    repo = make_repo(tmp_path)
    request = {
        "agent_name": "code-reviewer",
        "domain": "auth",
        "session_id": "abc-123",
        "project": "x",
        "correlation_id": "c",
        "max_patterns": 5,
        "min_confidence": 0.7,
    }
    done, _ = run_hook(hook_env(tmp_path), "learned-patterns", json.dumps(request).encode(), repo, launcher=launcher)
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["success"] is True and out["pattern_count"] == 1 and out["source"] == "persistence_file"
    assert isinstance(out["retrieval_ms"], int) and "### Password reset revokes sessions" in out["patterns_context"]
    garbage, _ = run_hook(hook_env(tmp_path), "learned-patterns", b"nope", repo, launcher=launcher)
    assert garbage.returncode == 0 and json.loads(garbage.stdout)["success"] is False


# --- with the pipeline ---------------------------------------------------------------------------


@pytest.fixture
async def stack(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[tuple[int, Path]]:
    repo = make_repo(tmp_path)
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project="acme/web").items, embedder, store)
    gw_settings = settings.model_copy(update={"gateway": GatewaySettings(port=0)})
    metrics = Metrics()
    stop = asyncio.Event()
    ports: list[int] = []
    ready = asyncio.Event()
    services_task = asyncio.create_task(
        run_services(
            SERVICES, settings, kafka, metrics, stop, Resources(settings, metrics, embedder, store), on_ready=ready.set
        )
    )
    gateway_task = asyncio.create_task(run_gateway(gw_settings, kafka, metrics, stop, on_ready=ports.append))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        await asyncio.sleep(0.05)
    try:
        yield ports[0], repo
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services_task, gateway_task), 30)


@pytest.mark.parametrize("launcher", [False, True])
async def test_the_hook_gets_the_injected_context_through_the_gateway(
    stack: tuple[int, Path], tmp_path: Path, launcher: bool
) -> None:
    port, repo = stack
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}")
    done, _ = await asyncio.to_thread(
        functools.partial(run_hook, env, "user-prompt-submit", prompt_input(repo), repo, launcher=launcher)
    )
    assert "### Password reset revokes sessions" in context_of(done)
    assert not (tmp_path / "data" / "hook.log").exists()  # no fallback, nothing to report

    # Claude Code's "http" hook type posts the same input straight to the gateway (with the secret in a header)
    headers = {"Authorization": f"Bearer {read_secret({}, str(tmp_path / 'data'))}"}

    def post() -> dict[str, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/hooks", data=prompt_input(repo), headers=headers)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    answer = await asyncio.to_thread(post)
    assert "Password reset revokes sessions" in answer["hookSpecificOutput"]["additionalContext"]


async def test_session_end_publishes_an_outcome(
    stack: tuple[int, Path], tmp_path: Path, kafka: KafkaClientConfig, topics: Topics
) -> None:
    port, repo = stack
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}")
    stdin = json.dumps(
        {"hook_event_name": "SessionEnd", "session_id": "sess-9", "cwd": str(repo), "reason": "logout"}
    ).encode()
    done, _ = await asyncio.to_thread(run_hook, env, "session-end", stdin, repo)
    assert done.returncode == 0 and json.loads(done.stdout) == {}
    (record,) = await read_all(kafka, topics.outcome_recorded, expect=1)
    event = EventDeserializer()(record.value)
    assert isinstance(event.payload, OutcomeRecorded)
    assert event.project == "acme/web" and event.session_id == "sess-9"
    # no evidence in the session: unknown, once, saying so (tests/integration/test_outcome_inference.py: with evidence)
    assert event.payload.source == "hook.SessionEnd:no_evidence" and event.payload.outcome.value == "unknown"
    assert event.payload.notes is not None and event.payload.notes.endswith("reason: logout")


async def test_when_the_pipeline_is_silent_the_gateway_answers_from_the_pattern_file(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    gw = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=700, min_confidence=0.5)}
    )
    stop, ports = asyncio.Event(), []
    task = asyncio.create_task(run_gateway(gw, kafka, Metrics(), stop, on_ready=ports.append))  # no services
    try:
        while not ports:
            await asyncio.sleep(0.05)
        env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{ports[0]}", CTXBUS_HOOK_TIMEOUT_MS="700")
        done, elapsed, startup = await asyncio.to_thread(
            timed_hook, env, "user-prompt-submit", prompt_input(repo), repo
        )
        assert "### Password reset revokes sessions" in context_of(done)
        assert_within(elapsed, 0.7, startup)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
