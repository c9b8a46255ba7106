"""The benchmark tells the stack's children apart: its broker, and the process it runs services in."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ctxbus.bench.pipeline import stack_pids


def test_the_service_child_and_the_broker_are_named_apart() -> None:
    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "ctxbus.cli.up_child"])
    broker = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while True:  # /proc shows a child's own command line once it has exec'd
            pids = stack_pids(os.getpid())
            named = {pid: name for name, pid in pids.items()}
            if named.get(service.pid, "").startswith("child") or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        # this process may have other children from earlier tests: they are named brokers, never children
        assert [name for name in pids if name.startswith("child")] == ["child"]
        assert pids["child"] == service.pid
        assert named[broker.pid].startswith("broker")
        assert pids["stack"] == pids["client"] == os.getpid()
    finally:
        for proc in (service, broker):
            proc.kill()
            proc.wait()
