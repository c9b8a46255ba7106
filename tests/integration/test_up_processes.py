"""``ctxbus up`` over two processes (``CTXBUS_UP_PROCESSES``): the injector and the recorder in a child of ``up``.

As real processes on the embedded broker: requests answered end to end; a SIGTERM stops the child before ``up``
ends and loses nothing (what was in flight is answered, once, after the next start); a SIGKILLed ``up`` leaves no
child; a killed child is restarted and the stack answers again; a child that cannot start stops ``up`` with a
clear error; a child that keeps dying stops the stack once its restart budget is spent.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.cli.up_processes import ServiceProcess
from ctxbus.components import open_embedder, open_store
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.process_layout import RestartBudget
from ctxbus.settings import KafkaSettings, Settings

from .kafka_io import read_all
from .quiet_ports import quiet_port
from .up_stack import stop_quietly

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UP_TIMEOUT_S = 90.0
PATTERNS = {
    "version": "1.0.0",
    "patterns": [
        {
            "pattern_id": "reset-revokes",
            "domain": "auth",
            "title": "Password reset revokes sessions",
            "description": "After a password reset, revoke refresh tokens and clear the session cache before login.",
            "confidence": 0.92,
        }
    ],
}


def _env(data: Path, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(data),
        CTXBUS_KAFKA_EMBEDDED_PORT=str(port),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_GATEWAY_PORT="0",
        CTXBUS_ARCHIVE_FLUSH_INTERVAL_MS="200",
        CTXBUS_ARCHIVE_OFFSETS_INTERVAL_MS="300",
        CTXBUS_LOG_LEVEL="INFO",
        CTXBUS_UP_PROCESSES="2",
    )
    env.update(extra)
    return env


def _ctxbus(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie runs nothing; its parent reaps it


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Up:
    """``ctxbus up`` as a user runs it, in its own session (as a terminal's job would be)."""

    def __init__(self, tmp: Path, **extra: str) -> None:
        self.data, self.log, self.port = tmp / "data", tmp / "up.log", quiet_port()
        self.env = _env(self.data, self.port, **extra)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> dict[str, object]:
        self.data.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbus.cli.main", "up"],
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self.runtime(lambda r: r["pid"] == self.proc_pid)

    @property
    def proc_pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def runtime(self, until: object = None, timeout_s: float = UP_TIMEOUT_S) -> dict[str, object]:
        """The runtime file's content once it exists (and ``until`` holds)."""
        deadline = time.monotonic() + timeout_s
        path = self.data / "runtime.json"
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
            try:
                data: dict[str, object] = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            if data and (until is None or until(data)):  # type: ignore[operator]
                return data
            time.sleep(0.05)
        raise AssertionError(f"runtime file not as expected within {timeout_s} s: {self.log.read_text()}")

    @property
    def kafka(self) -> KafkaClientConfig:
        settings = KafkaSettings(enable_idempotence=False, fetch_max_wait_ms=5)
        return KafkaClientConfig(settings, f"127.0.0.1:{self.port}", embedded=True)


def _child(runtime: dict[str, object]) -> dict[str, object]:
    processes = runtime["service_processes"]
    assert isinstance(processes, list) and len(processes) == 1, runtime
    child: dict[str, object] = processes[0]
    return child


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    stack = Up(tmp_path)
    yield stack
    stop_quietly(stack.proc, wait_s=60)


async def _ask(kafka: KafkaClientConfig, count: int, tag: str) -> set[str]:
    sent = set()
    async with EventPublisher(kafka, "test") as pub:
        for i in range(count):
            event = Envelope.root(
                RetrievalRequested(agent_name="t", prompt=f"{tag} password reset {i}", trigger=Trigger.USER_PROMPT),
                project="acme/web",
                session_id=f"{tag}-{i % 4}",
                producer="test",
            )
            await pub.publish(Topics().retrieval_requested, event)
            sent.add(str(event.correlation_id))
    return sent


def _recorded(data: Path, expect: int, timeout_s: float = 60.0) -> set[str]:
    """The correlation ids in the recorder's record once it holds ``expect`` injections."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = InjectionRecord(data / "injections.sqlite3")
        try:
            rows = record.recent(limit=10_000)
        finally:
            record.close()
        if len(rows) >= expect or time.monotonic() > deadline:
            return {r.correlation_id for r in rows}
        time.sleep(0.2)


async def test_two_processes_answer_end_to_end_and_a_sigterm_stops_the_child_losing_nothing(up: Up) -> None:
    (up.data).mkdir(parents=True)
    (up.data / "patterns.json").write_text(json.dumps(PATTERNS))
    imported = _ctxbus(up.env, "memory", "import", str(up.data / "patterns.json"), "--project", "acme/web")
    assert imported.returncode == 0, imported.stderr
    runtime = await asyncio.to_thread(up.start)
    child = _child(runtime)
    assert child["services"] == ["injector", "recorder"]
    child_pid = int(str(child["pid"]))
    assert _parent(child_pid) == up.proc_pid
    assert "ctxbus.cli.up_child" in _cmdline(child_pid)
    # each process serves its own readiness and metrics: up's own says whether the child is ready too
    status, ready = _get(int(str(runtime["metrics_port"])), "/readyz")
    assert status == 200 and ready["checks"]["process:injector+recorder"] == "ok", ready  # type: ignore[index]
    status, child_ready = _get(int(str(child["metrics_port"])), "/readyz")
    assert status == 200 and "consumer:injector" in child_ready["checks"], child_ready  # type: ignore[operator]

    asked = await asyncio.to_thread(_ctxbus, up.env, "request", "--project", "acme/web", "Fix login after reset")
    assert asked.returncode == 0, asked.stderr
    assert "### Password reset revokes sessions" in asked.stdout
    assert 'outcome="processed",service="injector"' in _metrics(int(str(child["metrics_port"])))

    # requests in flight when up is told to stop: the child gets SIGTERM, finishes and commits what it has, and
    # up drains its archive after that; the next start answers the rest, nothing twice
    sent = await _ask(up.kafka, 40, "term")
    assert up.proc is not None
    up.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(up.proc.wait, 60) == 0, up.log.read_text()
    assert _gone(child_pid, 5.0), "the child outlived up"
    log = up.log.read_text()
    assert log.index('"service_process_stopped"') < log.index('"archive_stopped"')
    assert not (up.data / "runtime.json").exists()

    await asyncio.to_thread(up.start)
    injected = await read_all(up.kafka, Topics().context_injected, expect=41, timeout_s=120)
    answered = [dict(r.headers)["ctxbus-correlation-id"].decode() for r in injected]
    assert sent <= set(answered) and len(answered) == len(set(answered)) == 41
    recorded = await asyncio.to_thread(_recorded, up.data, 41)
    assert recorded == set(answered)


async def test_one_process_runs_every_service_in_up(tmp_path: Path) -> None:
    stack = Up(tmp_path, CTXBUS_UP_PROCESSES="1")
    try:
        runtime = await asyncio.to_thread(stack.start)
        assert runtime["service_processes"] == []
        assert [line for line in _children_cmdlines(stack.proc_pid) if "up_child" in line] == []
        status, ready = _get(int(str(runtime["metrics_port"])), "/readyz")
        assert status == 200 and {"consumer:retriever", "consumer:injector", "consumer:recorder"} <= set(
            ready["checks"]  # type: ignore[arg-type]
        )
        asked = await asyncio.to_thread(_ctxbus, stack.env, "request", "--project", "nobody", "--json", "anything")
        assert asked.returncode == 0, asked.stderr
    finally:
        assert stack.proc is not None
        stack.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(stack.proc.wait, 60) == 0


def _children_cmdlines(pid: int) -> list[str]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and _parent(int(entry.name)) == pid:
                out.append(_cmdline(int(entry.name)))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return out


async def test_a_sigkilled_up_leaves_no_child(up: Up) -> None:
    runtime = await asyncio.to_thread(up.start)
    child_pid, broker_pid = int(str(_child(runtime)["pid"])), int(str(runtime["broker_pid"]))
    assert up.proc is not None
    up.proc.send_signal(signal.SIGKILL)
    up.proc.wait(10)
    assert _gone(child_pid, 10.0), f"the service child {child_pid} outlived a SIGKILLed up"
    assert _gone(broker_pid, 10.0)


async def test_a_killed_child_is_restarted_and_the_stack_answers_again(up: Up) -> None:
    runtime = await asyncio.to_thread(up.start)
    first = int(str(_child(runtime)["pid"]))
    os.kill(first, signal.SIGKILL)
    # while it restarts, up is alive but not ready; once the new child is ready, the runtime file names it
    restarted = await asyncio.to_thread(
        up.runtime, lambda r: _child(r)["pid"] not in (None, first) and _child(r)["metrics_port"] is not None
    )
    second = int(str(_child(restarted)["pid"]))
    assert _parent(second) == up.proc_pid
    log = up.log.read_text()
    assert '"service_process_exited"' in log and '"action": "restart"' in log and "-9" in log
    status, ready = _get(int(str(restarted["metrics_port"])), "/readyz")
    assert status == 200, ready
    asked = await asyncio.to_thread(_ctxbus, up.env, "request", "--project", "nobody", "--json", "anything")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["payload"]["empty_reason"] == "no_memories_in_project"


def test_a_child_that_cannot_start_stops_up_with_a_clear_error(tmp_path: Path) -> None:
    base = quiet_port(span=2)  # up's own metrics port must stay free while the child's is taken
    child_port = base + 1
    with socket.socket() as taken:  # the child's metrics port (base + 1, the injector's) is taken
        taken.bind(("127.0.0.1", child_port))
        taken.listen()
        env = _env(tmp_path / "data", free_port(), CTXBUS_SERVICE_METRICS_PORT=str(base))
        done = _ctxbus(env, "up", timeout=UP_TIMEOUT_S)
    text = done.stderr
    assert done.returncode == 1, text
    assert "Traceback" not in text
    assert f"the metrics port {child_port}" in text  # the child's own error
    last = text.strip().splitlines()[-1]
    assert last.startswith("ctxbus: error: the injector+recorder process exited with code 1 before it was ready")
    assert not (tmp_path / "data" / "runtime.json").exists()


async def test_a_child_that_keeps_dying_stops_the_stack_once_its_restarts_are_spent(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the child reads its settings from the environment it inherits, as up's child does
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CTXBUS_TOPIC_PREFIX", settings.topic_prefix)
    monkeypatch.setenv("CTXBUS_SERVICE_METRICS_PORT", "0")
    monkeypatch.setenv("CTXBUS_LOG_LEVEL", "WARNING")
    child = ServiceProcess(("recorder",), settings, kafka, RestartBudget(limit=1, window_s=300.0))
    stop = asyncio.Event()
    pids: list[int] = []
    running = asyncio.create_task(child.run(stop, on_ready=lambda c: pids.append(c.pid or 0)))
    try:
        for kills in (1, 2):
            deadline = time.monotonic() + UP_TIMEOUT_S
            while len(pids) < kills:
                assert time.monotonic() < deadline and not running.done()
                await asyncio.sleep(0.05)
            assert child.readiness() is None
            os.kill(pids[-1], signal.SIGKILL)
        await asyncio.wait_for(running, 30)
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
    assert stop.is_set()  # it stopped the stack it belongs to
    assert child.failure is not None and "exited with code -9: 2 exits within 300 s" in child.failure
    assert child.readiness() is not None
    assert all(not _alive(pid) for pid in pids)


def test_when_up_itself_fails_its_child_is_stopped_in_order_and_not_left_behind(tmp_path: Path) -> None:
    """The store is busy (another process owns it): up cannot run the retriever, so it stops, and its child
    with it: SIGTERM, waited for, before the archive drains; nothing keeps running."""
    env = _env(tmp_path / "data", free_port())
    settings = Settings(data_dir=tmp_path / "data")
    owner = open_store(settings, open_embedder(settings))
    try:
        done = _ctxbus(env, "up", timeout=UP_TIMEOUT_S)
    finally:
        owner.close()
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("ctxbus: error: the embedded store")
    started = [json.loads(line) for line in done.stderr.splitlines() if '"service_process_started"' in line]
    assert len(started) == 1
    assert not _alive(int(started[0]["pid"])), "the child outlived up"
    assert done.stderr.index('"service_process_stopped"') < done.stderr.index('"archive_stopped"')
