"""``ctxbus up`` run as a user runs it, for the tests of its history (the archive) and its broker's recycling:
start and stop it with signals, send it requests, read its answers and its replay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.archive.files import read_partition, scan
from ctxbus.archive.layout import ArchivedFile
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

from .kafka_io import read_all
from .quiet_ports import quiet_port

UP_TIMEOUT_S = 90.0
FLUSH_MS = 200


def stack_env(data: Path, port: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
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
    env.update(extra or {})
    return env


class Stack:
    """``ctxbus up`` as a user runs it (its own process, the embedded broker on a fixed port, the archive on)."""

    def __init__(self, tmp: Path, extra_env: Mapping[str, str] | None = None) -> None:
        self.extra_env = dict(extra_env or {})
        self.data = tmp / "data"
        self.port = quiet_port()  # restarted on this port: no client's connect() may take it meanwhile
        self.log = tmp / "up.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        return stack_env(self.data, self.port, self.extra_env)

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "runtime.json").unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbus.cli.main", "up"],
            env=self.env,
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
        # its publishers keep what they send until up's archive holds it (adapters/kafka/resend.py)
        return KafkaClientConfig(settings, f"127.0.0.1:{self.port}", embedded=True, archive=self.data / "archive")

    def replay_requests(self) -> set[str]:
        env = self.env
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


def archived(stack: Stack, topic: str) -> int:
    files = [f for f in scan(stack.data / "archive") if f.topic == topic]
    by_partition: dict[int, list[ArchivedFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    return sum(1 for fs in by_partition.values() for _ in read_partition(fs))


def wait_archived(stack: Stack, expected: dict[str, int]) -> None:
    deadline = time.monotonic() + 60
    while any(archived(stack, topic) < count for topic, count in expected.items()):
        assert time.monotonic() < deadline, {topic: archived(stack, topic) for topic in expected}
        time.sleep(FLUSH_MS / 1000.0)


def stop_quietly(proc: subprocess.Popen[bytes] | None, wait_s: float = 30.0) -> None:
    """The fixtures' teardown of an ``up`` process: SIGTERM, then SIGKILL after ``wait_s``."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()


async def ask(stack: Stack, count: int, tag: str) -> set[str]:
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


async def answers(stack: Stack, expect: int) -> list[str]:
    injected = await read_all(stack.kafka, Topics().context_injected, expect=expect, timeout_s=120)
    return [dict(r.headers)["ctxbus-correlation-id"].decode() for r in injected]
