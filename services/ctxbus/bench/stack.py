"""An ephemeral ctxbus stack for benchmarks: its own data directory and topic prefix, N synthetic
memories loaded (in a child process, so the benchmark's own process stays small), ``ctxbus up``
running as a separate process on the embedded broker, stopped with SIGTERM at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.lifeline import lifeline
from ctxbus.bench.corpus import memories
from ctxbus.memory.ingest import ingest
from ctxbus.settings import Settings

PROJECT = "bench"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class BenchStack:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    settings: Settings
    kafka: KafkaClientConfig
    memory_load_s: float


def load_memories(settings: Settings, count: int) -> float:
    """Embed and store ``count`` synthetic memories, in a child process (the benchmark's own process stays
    small, as a hook's parent would be); returns the seconds it took."""
    started = time.perf_counter()
    code = (
        "import sys; from pathlib import Path; from ctxbus.bench.stack import _load_in_process; "
        "from ctxbus.settings import Settings; "
        "_load_in_process(Settings(data_dir=Path(sys.argv[1]), topic_prefix=sys.argv[2]), int(sys.argv[3]))"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(settings.data_dir), settings.topic_prefix, str(count)],
        check=True,
        preexec_fn=lifeline(),
    )
    return time.perf_counter() - started


def _load_in_process(settings: Settings, count: int) -> None:
    from ctxbus.components import open_embedder, open_store  # noqa: PLC0415

    embedder = open_embedder(settings)
    store = open_store(settings, embedder)
    try:
        items = memories(count, PROJECT)
        for start in range(0, len(items), 256):
            ingest(items[start : start + 256], embedder, store, near_duplicate=None)  # templated corpus
    finally:
        store.close()


def start_stack(env: dict[str, str], data_dir: Path) -> subprocess.Popen[bytes]:
    log = (data_dir / "stack.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxbus.cli.main", "up"],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
        preexec_fn=lifeline(signal.SIGTERM),  # noqa: PLW1509 (async-signal-safe): a killed benchmark stops its stack
    )
    runtime = data_dir / "runtime.json"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not runtime.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the stack did not start; see {data_dir / 'stack.log'}")
        time.sleep(0.05)
    return proc


@contextmanager
def bench_stack(memories_count: int, **env_extra: str) -> Iterator[BenchStack]:
    data_dir = Path(tempfile.mkdtemp(prefix="ctxbus-bench-"))
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    env = {k: v for k, v in os.environ.items() if k != "CTXBUS_KAFKA_BOOTSTRAP_SERVERS"}
    env.update(
        CTXBUS_DATA_DIR=str(data_dir),
        CTXBUS_TOPIC_PREFIX=prefix,
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_GATEWAY_PORT="0",
        CTXBUS_LOG_LEVEL="WARNING",
    )
    env.update(env_extra)
    settings = Settings(data_dir=data_dir, topic_prefix=prefix)
    load_s = load_memories(settings, memories_count)
    proc = start_stack(env, data_dir)
    try:
        runtime = json.loads((data_dir / "runtime.json").read_text())
        # the load's publishers keep what they send until the archive holds it, as every ctxbus client of up does
        kafka = KafkaClientConfig(
            settings.kafka, runtime["bootstrap_servers"], embedded=True, archive=settings.archive_dir
        )
        yield BenchStack(proc, env, settings, kafka, load_s)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
