"""The runtime file: a stack that is gone is recognised (dead or recycled pid) and its leftovers cleared."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from ctxbus.runtime import RuntimeInfo, clear_stale_runtime, read_runtime
from ctxbus.settings import Settings


def _info(pid: int, broker_pid: int | None = None) -> RuntimeInfo:
    return RuntimeInfo(
        pid=pid,
        bootstrap_servers="127.0.0.1:1",
        embedded=True,
        metrics_port=1,
        gateway_port=1,
        topic_prefix="ctxbus",
        started_at="2026-01-01T00:00:00+00:00",
        broker_pid=broker_pid,
    )


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _exec_done(proc: subprocess.Popen[bytes], name: str) -> None:
    """Wait until ``bash -c 'exec -a NAME ...'`` runs as NAME: while the exec is under way, /proc shows an
    empty command line, which is no broker's (a loaded machine once caught it there)."""
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while not cmdline.read_bytes().startswith(name.encode() + b"\0"):
        assert time.monotonic() < deadline, f"{name} never started"
        time.sleep(0.01)


def test_a_live_process_that_is_not_ctxbus_does_not_make_a_stack(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with subprocess.Popen(["sleep", "30"]) as other:  # a recycled pid: alive, but another program
        try:
            _info(other.pid).write(settings.runtime_file)
            assert read_runtime(settings) is None
            assert clear_stale_runtime(settings) is not None
            assert not settings.runtime_file.exists()
        finally:
            other.kill()


def test_a_stale_file_is_removed_and_the_broker_it_left_is_stopped(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    orphan = subprocess.Popen(["bash", "-c", "exec -a tansu-broker sleep 30"])
    try:
        _exec_done(orphan, "tansu-broker")
        _info(_dead_pid(), broker_pid=orphan.pid).write(settings.runtime_file)
        said = clear_stale_runtime(settings)
        assert said is not None and f"pid {orphan.pid}" in said
        assert orphan.wait(10) != 0
        assert not settings.runtime_file.exists()
    finally:
        if orphan.poll() is None:
            orphan.kill()


def test_the_running_stack_is_left_alone_and_old_files_without_a_broker_pid_are_read(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "ctxbus"]) as stack:
        try:
            old = {
                "pid": stack.pid,
                "bootstrap_servers": "127.0.0.1:9",
                "embedded": True,
                "metrics_port": 1,
                "gateway_port": 2,
                "topic_prefix": "p",
                "started_at": "2026-01-01T00:00:00+00:00",
            }
            settings.runtime_file.write_text(json.dumps(old))
            time.sleep(0.05)
            info = read_runtime(settings)
            assert info is not None and info.pid == stack.pid and info.broker_pid is None
            assert clear_stale_runtime(settings) is None
            assert settings.runtime_file.exists()
        finally:
            stack.kill()


def test_an_unreadable_file_is_removed(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    settings.runtime_file.parent.mkdir(parents=True, exist_ok=True)
    settings.runtime_file.write_text("{not json")
    assert read_runtime(settings) is None
    assert clear_stale_runtime(settings) is not None
    assert not settings.runtime_file.exists()
