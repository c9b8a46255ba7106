"""``ctxbus bench chaos``: the processing guarantees under faults.

Starts the embedded broker and the three services as separate ``ctxbus run`` processes (each its own
consumer group) on a store with synthetic memories, sends a steady load of requests (each its own
correlation id), and while the load runs: SIGKILLs the services in turn (recorder, injector, retriever,
...), restarting each after a short pause; writes the poison corpus (the 1.1 MB and 10 MB records included)
onto the request topic, and the oversize records onto the topics the injector and the recorder consume;
freezes the broker (SIGSTOP, then SIGCONT) for a few seconds. Then it waits for the pipeline to drain,
stops the services with SIGTERM, reads the topics and the recorder's record back and counts: requests lost
(no injection), duplicated (more than one injection or completion), poison dead-lettered with the right
reason, dead letters of good records, and the recorder's misses (chaos_tally).

The run itself (load, faults, drain, figures) is ``chaos_run.ChaosRun``; this module sets its stack up and tears it
down.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.bench.chaos_plan import PARTITIONS, Plan, service_env
from ctxbus.bench.chaos_procs import ServiceProcesses, resume
from ctxbus.bench.chaos_run import ChaosError, ChaosRun
from ctxbus.bench.poison import MIB
from ctxbus.bench.stack import load_memories
from ctxbus.settings import KafkaSettings, Settings


def _stderr(message: str) -> None:
    print(f"chaos: {message}", file=sys.stderr, flush=True)


def run(
    requests: int,
    rate: float,
    kills: int,
    stall_s: float,
    memories: int,
    *,
    keep: bool = False,
    say: Callable[[str], None] = _stderr,
) -> dict[str, Any]:
    """One chaos run; its figures. The data directory (logs included) is kept when a target is missed, or
    with ``keep``."""
    plan = Plan(requests, rate, kills, stall_s, memories)
    data_dir = Path(tempfile.mkdtemp(prefix="ctxbus-chaos-"))
    prefix = f"chaos{uuid.uuid4().hex[:6]}"
    ok = False
    try:
        say(f"loading {memories} memories into {data_dir}")
        load_memories(Settings(data_dir=data_dir, topic_prefix=prefix), memories)
        with EmbeddedBroker(log_file=data_dir / "broker.log") as broker:
            kafka = KafkaSettings(
                bootstrap_servers=broker.bootstrap_servers,
                enable_idempotence=False,
                fetch_max_wait_ms=5,
                topic_partitions=PARTITIONS,
                max_record_bytes=MIB,
            )
            settings = Settings(data_dir=data_dir, topic_prefix=prefix, kafka=kafka)
            config = KafkaClientConfig(kafka, broker.bootstrap_servers, embedded=True)
            procs = ServiceProcesses(service_env(data_dir, prefix, broker.bootstrap_servers), data_dir / "logs")
            broker_pid = broker.pid
            if broker_pid is None:
                raise ChaosError("the embedded broker did not start")
            try:
                result = asyncio.run(ChaosRun(plan, settings, config, procs, broker_pid, say).execute())
            finally:
                with contextlib.suppress(ProcessLookupError):
                    resume(broker_pid)  # never leave it frozen
                procs.kill_all()
        ok = bool(result["ok"])
        result["data_dir"] = None if ok and not keep else str(data_dir)
        return result
    finally:
        if ok and not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            say(f"kept {data_dir} (service logs under logs/)")
