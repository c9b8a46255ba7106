"""``ctxbus memory import`` while the services run as separate ``ctxbus run`` processes (issue 10, finding 8).

A ``ctxbus run retriever`` against a configured broker owns the store and writes no runtime file: the import
finds the store busy and goes through that broker to the store's owner (it failed with "in use by another
process"). With no broker to reach it says so clearly, never with a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.settings import Settings

from .test_service_process import service_env

pytestmark = pytest.mark.integration


def ctxbus(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ctxbus.cli.main", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def retriever(settings: Settings, tmp_path: Path, topics: object) -> Iterator[dict[str, str]]:
    """``ctxbus run retriever`` as its own process, consuming (its env: the broker, topics and data dir)."""
    env = service_env(settings)
    log = tmp_path / "retriever.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbus.cli.main", "run", "retriever"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while "services_ready" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert not settings.runtime_file.exists()  # no `ctxbus up`: nothing but the configured broker to find
        yield env
    finally:
        proc.terminate()
        proc.wait(30)


def test_an_import_goes_through_the_configured_broker_to_the_running_retriever(
    retriever: dict[str, str], tmp_path: Path
) -> None:
    memories = tmp_path / "items.jsonl"
    memories.write_text('{"id": "m1", "kind": "warning", "content": "Never log reset tokens", "domain": "auth"}\n')
    done = ctxbus(retriever, "memory", "import", str(memories), "--project", "p", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["via"].endswith("memory.upserted.v1") and summary["added"] == 1 and summary["confirmed"] == 1


def test_without_a_broker_to_reach_the_busy_store_is_a_clear_error(retriever: dict[str, str], tmp_path: Path) -> None:
    memories = tmp_path / "items.jsonl"
    memories.write_text('{"id": "m1", "kind": "warning", "content": "Never log reset tokens"}\n')
    no_broker = {k: v for k, v in retriever.items() if k != "CTXBUS_KAFKA_BOOTSTRAP_SERVERS"}
    done = ctxbus(no_broker, "memory", "import", str(memories), "--project", "p")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "in use" in done.stderr and "CTXBUS_KAFKA_BOOTSTRAP_SERVERS" in done.stderr
    unreachable = retriever | {"CTXBUS_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"}
    done = ctxbus(unreachable, "memory", "import", str(memories), "--project", "p", "--timeout", "5")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot reach" in done.stderr
