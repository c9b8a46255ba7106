"""History survives a restart of the embedded stack (issue 12): SIGTERM loses nothing, SIGKILL at most the
last flush interval, the services' positions come back (nothing is answered twice), timestamps are kept."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.archive.files import read_partition, scan
from ctxbus.archive.layout import ArchivedFile
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

from .kafka_io import read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UP_TIMEOUT_S = 90.0
FLUSH_MS = 200


def _env(data: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(data),
        CTXBUS_KAFKA_EMBEDDED_PORT=str(port),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_GATEWAY_PORT="0",
        CTXBUS_ARCHIVE_FLUSH_INTERVAL_MS=str(FLUSH_MS),
        CTXBUS_ARCHIVE_OFFSETS_INTERVAL_MS="300",
        CTXBUS_LOG_LEVEL="INFO",
    )
    return env


class Stack:
    def __init__(self, tmp: Path) -> None:
        self.data = tmp / "data"
        self.port = free_port()
        self.log = tmp / "up.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "runtime.json").unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbus.cli.main", "up"],
            env=_env(self.data, self.port),
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + UP_TIMEOUT_S
        while not (self.data / "runtime.json").exists():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)

    def stop(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(60)
        if sig == signal.SIGKILL:  # the broker dies with it (parent-death signal); wait until the port is free
            time.sleep(0.5)

    @property
    def kafka(self) -> KafkaClientConfig:
        settings = KafkaSettings(enable_idempotence=False, fetch_max_wait_ms=5)
        return KafkaClientConfig(settings, f"127.0.0.1:{self.port}", embedded=True)

    def replay_requests(self) -> set[str]:
        env = _env(self.data, self.port)
        done = subprocess.run(
            [sys.executable, "-m", "ctxbus.cli.main", "replay", "--topic", "requested", "--format", "csv"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        rows = done.stdout.strip().splitlines()[1:]
        return {row.split(",", 1)[0] for row in rows}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(30)
        except subprocess.TimeoutExpired:
            s.proc.kill()


async def _ask(stack: Stack, count: int, tag: str) -> set[str]:
    topics = Topics()
    sent = set()
    async with EventPublisher(stack.kafka, "test") as pub:
        for i in range(count):
            event = Envelope.root(
                RetrievalRequested(agent_name="t", prompt=f"{tag} question {i}", trigger=Trigger.USER_PROMPT),
                project="acme/web",
                session_id=f"{tag}-{i % 3}",
                producer="test",
            )
            await pub.publish(topics.retrieval_requested, event)
            sent.add(str(event.correlation_id))
    return sent


async def _answers(stack: Stack, expect: int) -> list[str]:
    injected = await read_all(stack.kafka, Topics().context_injected, expect=expect, timeout_s=60)
    return [dict(r.headers)["ctxbus-correlation-id"].decode() for r in injected]


async def test_replay_lists_every_request_made_before_a_sigterm_and_a_sigkill(stack: Stack) -> None:
    await asyncio.to_thread(stack.start)
    first = await _ask(stack, 12, "before-term")
    assert set(await _answers(stack, 12)) == first
    await asyncio.to_thread(stack.stop, signal.SIGTERM)

    await asyncio.to_thread(stack.start)
    log = stack.log.read_text()
    assert "restored" in log
    assert await asyncio.to_thread(stack.replay_requests) == first
    second = await _ask(stack, 9, "before-kill")
    answers = await _answers(stack, 21)
    assert set(answers) == first | second and len(answers) == 21  # nothing answered twice after the restart
    await asyncio.sleep(4 * FLUSH_MS / 1000.0)  # more than one flush interval: what a SIGKILL may lose is gone
    await asyncio.to_thread(stack.stop, signal.SIGKILL)

    await asyncio.to_thread(stack.start)
    assert await asyncio.to_thread(stack.replay_requests) == first | second
    await asyncio.sleep(1.0)  # the services had their chance to answer anything again: they must not
    answers = await _answers(stack, 21)
    assert len(answers) == 21 and set(answers) == first | second

    # the archive is Kafka Connect's layout, Avro container files, original timestamps kept
    files = [f for f in scan(stack.data / "archive") if f.topic == Topics().retrieval_requested]
    assert files and all("/year=" in f.path.as_posix() and "/hour=" in f.path.as_posix() for f in files)
    by_partition: dict[int, list[ArchivedFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    records = [r for fs in by_partition.values() for r in read_partition(fs)]
    assert len(records) == 21
    assert all(r["timestamp"] > 1_700_000_000_000 and r["value"][:1] == b"\x00" for r in records)
    state = json.loads((stack.data / "archive" / "state.json").read_text())
    assert "ctxbus.retriever" in state["groups"]
