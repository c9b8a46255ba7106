"""README's flow, as a user runs it: separate `ctxbus` processes on the embedded default."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.runtime import metrics_ports

pytestmark = pytest.mark.integration

PATTERNS = {
    "version": "1.0.0",
    "patterns": [
        {
            "pattern_id": "reset-revokes",
            "domain": "auth",
            "title": "Password reset revokes sessions",
            "description": "After a password reset, revoke refresh tokens and clear the session cache before login.",
            "confidence": 0.92,
            "usage_count": 15,
            "success_rate": 0.87,
        },
        {
            "pattern_id": "hook-exit",
            "domain": "hooks",
            "title": "Hook Graceful Exit Pattern",
            "description": "Always exit 0 from hook scripts, even on errors.",
            "confidence": 0.95,
        },
    ],
}


def ctxbus(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    e.update(CTXBUS_DATA_DIR=str(tmp_path / "data"), CTXBUS_SERVICE_METRICS_PORT="0")
    return e


@pytest.fixture
def stack(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, object]]]:
    (tmp_path / "patterns.json").write_text(json.dumps(PATTERNS))
    imported = ctxbus(env, "memory", "import", str(tmp_path / "patterns.json"), "--project", "acme/web")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout.splitlines()[-1]) == {
        "imported": 2,
        "added": 2,
        "replaced": 0,
        "merged": 0,
        "clustered": 0,
        "superseded": 0,
        "rejected": 0,
        "project": "acme/web",
        "via": "store",
    }
    assert imported.stderr == ""  # progress is drawn only on a terminal
    log = (tmp_path / "up.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "ctxbus.cli.main", "up"], env=env, stdout=log, stderr=log)
    runtime = Path(env["CTXBUS_DATA_DIR"]) / "runtime.json"
    deadline = time.monotonic() + 60
    while not runtime.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "up.log").read_text()
        time.sleep(0.1)
    try:
        yield proc, json.loads(runtime.read_text())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_readme_flow(stack: tuple[subprocess.Popen[bytes], dict[str, object]], env: dict[str, str]) -> None:
    proc, runtime = stack
    data = Path(env["CTXBUS_DATA_DIR"])  # ctxbus up made the gateway's secret: private, in a private data dir
    assert stat.S_IMODE((data / "gateway.secret").stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    asked = ctxbus(env, "request", "--project", "acme/web", "--session", "s-1", "Fix login after password reset")
    assert asked.returncode == 0, asked.stderr
    assert "### Password reset revokes sessions" in asked.stdout
    assert "Hook Graceful Exit" not in asked.stdout  # unrelated: below the similarity floor
    assert "end to end" in asked.stderr and "correlation" in asked.stderr

    empty = ctxbus(env, "request", "--project", "nobody", "--json", "anything at all")
    assert empty.returncode == 0
    assert json.loads(empty.stdout)["payload"]["empty_reason"] == "no_memories_in_project"

    tailed = ctxbus(env, "tail", "--from-beginning", "--max-events", "2", "--json", timeout=30)
    events = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert sorted(e["project"] for e in events) == ["acme/web", "nobody"]

    deadline = time.monotonic() + 15
    while True:
        rows = [json.loads(x) for x in ctxbus(env, "injections", "--project", "acme/web").stdout.splitlines()]
        if rows or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert rows[0]["item_ids"] == ["reset-revokes"] and rows[0]["session_id"] == "s-1"

    # the one documented address: up's /metrics serves its child process's series too (on 2 cores the injector
    # and the recorder run there, with their own port as well)
    assert len(metrics_ports(runtime)) == 1 + len(runtime["service_processes"])  # type: ignore[arg-type]
    with urllib.request.urlopen(f"http://127.0.0.1:{runtime['metrics_port']}/metrics", timeout=5) as resp:
        metrics = resp.read().decode()
    for service in ("retriever", "injector", "recorder"):
        assert f'outcome="processed",service="{service}"' in metrics
    assert "ctxbus_end_to_end_seconds_count" in metrics and "ctxbus_processing_seconds_bucket" in metrics

    # while the stack owns the store, an import goes through the bus (memory.upserted) to that owner
    later = {
        "version": "1.0.0",
        "patterns": [
            {
                "pattern_id": "samesite-cookies",
                "domain": "auth",
                "title": "SameSite session cookies",
                "description": "Session cookies are SameSite=Lax and Secure; login breaks if a proxy strips them.",
                "confidence": 0.9,
            },
        ],
    }
    (Path(env["CTXBUS_DATA_DIR"]) / "later.json").write_text(json.dumps(later))
    # it waits (by default) until the store's owner answers that the item is stored: searchable at once
    waited = ctxbus(env, "memory", "import", str(Path(env["CTXBUS_DATA_DIR"]) / "later.json"), "--project", "acme/web")
    assert waited.returncode == 0, waited.stderr
    summary = json.loads(waited.stdout.splitlines()[-1])
    assert summary["via"].endswith("memory.upserted.v1") and (summary["confirmed"], summary["added"]) == (1, 1)
    again = ctxbus(env, "request", "--project", "acme/web", "session cookies samesite proxy login")
    assert "### SameSite session cookies" in again.stdout
    queued = ctxbus(
        env, "memory", "import", str(Path(env["CTXBUS_DATA_DIR"]) / "later.json"), "--project", "acme/web", "--no-wait"
    )
    assert queued.returncode == 0 and json.loads(queued.stdout.splitlines()[-1])["queued"] == 1

    # the Python API's batch commands reach the store through the process that owns it
    queries = Path(env["CTXBUS_DATA_DIR"]) / "queries.jsonl"
    queries.write_text('{"id": "q1", "query": "password reset sessions"}\n{"id": "q2", "query": "  "}\n')
    searched = ctxbus(env, "search", "--project", "acme/web", "--queries", str(queries), "--k", "2", "--mode", "hybrid")
    assert searched.returncode == 3, searched.stderr  # one bad query: reported, the others answered
    first, second = (json.loads(line) for line in searched.stdout.splitlines())
    assert first["id"] == "q1" and first["items"][0]["id"] == "reset-revokes" and first["ms"] >= 0
    assert second == {"id": "q2", "error": "the query is empty or blank"}
    primed = ctxbus(env, "prime", "--project", "acme/web", "--task-type", "bugfix", "Fix login after password reset")
    assert primed.returncode == 0, primed.stderr
    document = json.loads(primed.stdout)
    assert document["task_context"]["task_type"] == "bugfix"
    assert document["patterns"][0]["id"] == "reset-revokes" and document["token_count"] > 0

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not (Path(env["CTXBUS_DATA_DIR"]) / "runtime.json").exists()


def test_clear_errors_without_a_stack_and_for_bad_input(env: dict[str, str], tmp_path: Path) -> None:
    no_stack = ctxbus(env, "request", "--project", "p", "hello")
    assert no_stack.returncode == 1 and "ctxbus up" in no_stack.stderr and "Traceback" not in no_stack.stderr
    bad = ctxbus(env, "request", "--project", "p", "--max-items", "0", "hello")
    assert bad.returncode == 2 and "max_items" in bad.stderr
    missing = ctxbus(env, "memory", "import", str(tmp_path / "nope.json"), "--project", "p")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    broken = ctxbus(env, "memory", "import", str(tmp_path / "bad.json"), "--project", "p")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr
    (tmp_path / "items.jsonl").write_text(
        '{"id": "m1", "kind": "warning", "content": "Never log reset tokens", "domain": "auth"}\n'
        '{"id": "m2", "kind": "nope", "content": "x"}\n'
    )
    mixed = ctxbus(env, "memory", "import", str(tmp_path / "items.jsonl"), "--project", "p")
    lines = mixed.stdout.splitlines()
    assert mixed.returncode == 3 and ":2 (m2): kind" in lines[0]
    assert json.loads(lines[-1]) | {"via": "store"} == {
        "rejected": 1,
        "project": "p",
        "imported": 1,
        "added": 1,
        "replaced": 0,
        "merged": 0,
        "clustered": 0,
        "superseded": 0,
        "via": "store",
    }
    bad_timeout = ctxbus(env, "memory", "import", str(tmp_path / "items.jsonl"), "--project", "p", "--timeout", "0")
    assert bad_timeout.returncode == 2 and "--timeout must be a positive" in bad_timeout.stderr
    (tmp_path / "adr-7.md").write_text(
        "# ADR 7: Sessions\n\nStatus: accepted\n\n## Decision\n\nRevoke refresh tokens.\n\n"
        "## Consequences\n\nUsers sign in again.\n"
    )
    adr = ctxbus(env, "memory", "import", str(tmp_path / "adr-7.md"), "--project", "p")
    assert adr.returncode == 0 and json.loads(adr.stdout)["imported"] == 3
    bad_state = ctxbus(env, "gap", "--state", str(tmp_path / "bad.json"), "--detect-only")
    assert bad_state.returncode != 0 and "Traceback" not in bad_state.stderr and "ctxbus: error:" in bad_state.stderr
    sample = Path(__file__).resolve().parents[1] / "data" / "agent_state_gap.json"
    detected = ctxbus(env, "gap", "--state", str(sample), "--detect-only")
    assert detected.returncode == 0, detected.stderr
    assert json.loads(detected.stdout)["gap"]["reason"] == "clarification_requested"
