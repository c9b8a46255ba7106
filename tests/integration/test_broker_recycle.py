"""``ctxbus up`` recycles its embedded broker when a partition has taken enough records and the stack is quiet
(ctxbus.core.broker_recycle): the history comes back, nothing is answered twice, the hook path works again, and
the stack says so in its log, its runtime file and its metrics."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.archive.files import read_file, scan
from ctxbus.contract.topics import Topics

from .up_stack import Stack, answers, ask, stop_quietly, wait_archived

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECYCLE_RECORDS = 4
IDLE_S = 3.0  # the pipeline writes continuously while it answers: a recycle waits for real quiet


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(
        tmp_path,
        {
            "CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS": str(RECYCLE_RECORDS),
            "CTXBUS_KAFKA_EMBEDDED_RECYCLE_IDLE_S": str(IDLE_S),
            "HOME": str(tmp_path / "home"),
        },
    )
    yield s
    stop_quietly(s.proc)


def _runtime(stack: Stack) -> dict[str, object]:
    data: dict[str, object] = json.loads((stack.data / "runtime.json").read_text())
    return data


def _wait_for_log(stack: Stack, marker: str, count: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while stack.log.read_text().count(marker) < count:
        assert stack.proc is not None and stack.proc.poll() is None, stack.log.read_text()[-4000:]
        assert time.monotonic() < deadline, stack.log.read_text()[-4000:]
        time.sleep(0.1)


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def _hook(stack: Stack, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    stdin = json.dumps(
        {
            "session_id": "recycled-1",
            "transcript_path": "/dev/null",
            "cwd": str(cwd),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "Add a retry budget to the payment client",
        }
    ).encode()
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "hook", "user-prompt-submit"],
        input=stdin,
        env=stack.env,
        cwd=cwd,
        capture_output=True,
        timeout=30,
        check=False,
    )


async def test_a_quiet_stack_recycles_its_broker_and_loses_or_repeats_nothing(stack: Stack, tmp_path: Path) -> None:
    await asyncio.to_thread(stack.start)
    first_broker = _runtime(stack)["broker_pid"]
    first = await ask(stack, 12, "before-recycle")  # 12 requests over 3 sessions: a partition takes 4 or more
    assert set(await answers(stack, 12)) == first

    # quiet for IDLE_S with a partition past the limit: up stops its services, drains the archive, restarts the
    # broker on the same port, refills it and starts again
    await asyncio.to_thread(_wait_for_log, stack, '"broker_recycled"', 1)
    log = stack.log.read_text()
    assert log.count('"broker_recycle"') == 1 and "records appended since the broker started" in log
    runtime = _runtime(stack)
    assert runtime["broker_pid"] != first_broker and runtime["pid"] == stack.proc.pid  # type: ignore[union-attr]
    assert runtime["bootstrap_servers"] == f"127.0.0.1:{stack.port}"
    assert _metric(int(runtime["metrics_port"]), "ctxbus_embedded_broker_recycles_total") == 1.0  # type: ignore[call-overload]

    # the history is back, and nothing was answered again
    assert await asyncio.to_thread(stack.replay_requests) == first
    await asyncio.sleep(1.0)
    got = await answers(stack, 12)
    assert len(got) == 12 and set(got) == first

    # the hook path works through the new round's gateway: its request is answered once, with the others
    cwd = tmp_path / "repo"
    cwd.mkdir()
    done = await asyncio.to_thread(_hook, stack, cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    second = await ask(stack, 2, "after-recycle")  # with the hook's, 3 requests: under the limit of 4 in any partition
    got = await answers(stack, 15)
    assert len(got) == 15 and first | second <= set(got)
    requested = await asyncio.to_thread(stack.replay_requests)
    assert len(requested) == 15 and first | second <= requested
    # the archive holds each request once (the refilled records are not archived again, nor counted as new)
    await asyncio.to_thread(wait_archived, stack, {Topics().retrieval_requested: 15})
    offsets = [
        (f.partition, int(r["offset"]))
        for f in scan(stack.data / "archive")
        if f.topic == Topics().retrieval_requested
        for r in read_file(f.path)
    ]
    assert len(offsets) == len(set(offsets)) == 15
    assert stack.log.read_text().count('"broker_recycle"') == 1  # this round has not taken enough to recycle
