"""``ctxbus bench footprint``: what one member of each service costs, for the capacity model.

Starts the embedded broker and the retriever, injector and recorder as separate ``ctxbus run`` processes over
a store of N synthetic memories, measures each process's resident memory idle, then sends a steady load of
requests and measures the CPU time each process spent per request (user + system, from /proc: far less
sensitive to other work on the machine than a wall-clock rate; the CPU it spends idle, polling the broker, is
measured before and after the load, the lower taken out), its resident memory after the load, and the store's
size on disk. Requests per second per core = 1000 / CPU ms per request. Linux only (/proc).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench import chaos_load
from ctxbus.bench.chaos_plan import PARTITIONS, service_env
from ctxbus.bench.chaos_procs import SERVICES, ServiceProcesses
from ctxbus.bench.corpus import prompts
from ctxbus.bench.stack import PROJECT, load_memories
from ctxbus.bench.stats import summary
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings, Settings

READY_TIMEOUT_S = 300.0
DRAIN_TIMEOUT_S = 300.0
#: after the services are ready: their start-up work (model load, ledger refresh) is not counted
SETTLE_S = 3.0
#: how long the idle CPU (the consumers' polling, subtracted from the load's) is measured
IDLE_S = 5.0
MIB = 1024 * 1024


class FootprintError(RuntimeError):
    """The run could not be carried out (a service never started)."""


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(rest.split()[0]) / 1024.0
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def directory_mib(path: Path) -> float:
    """The disk space a directory's files take (allocated blocks, as ``du``: the engine's write-ahead log is
    preallocated as sparse 32 MiB files)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) / MIB


async def _idle_cores(pids: dict[str, int]) -> dict[str, float]:
    """The share of a core each process spends over IDLE_S with nothing to do."""
    start = {name: cpu_seconds(pid) for name, pid in pids.items()}
    await asyncio.sleep(IDLE_S)
    return {name: (cpu_seconds(pid) - start[name]) / IDLE_S for name, pid in pids.items()}


async def _measure(
    procs: ServiceProcesses, config: KafkaClientConfig, topics: Topics, requests: int, rate: float
) -> dict[str, Any]:
    await ensure_topics(config, topics.all(), compacted=(topics.schemas,), partitions=PARTITIONS, replication=1)
    for name in SERVICES:
        procs.start(name)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not all(procs.ready(n) for n in SERVICES):
        for gone in procs.check_exits():
            raise FootprintError(f"the {gone.name} exited with code {gone.code} while starting:\n{gone.log_tail}")
        if time.monotonic() > deadline:
            raise FootprintError(f"the services were not ready after {READY_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.2)
    await asyncio.sleep(SETTLE_S)
    pids = {name: run.proc.pid for name in SERVICES if (run := procs.current(name)) is not None}
    idle = {name: proc_status(pid) for name, pid in pids.items()}
    # the consumers poll the broker even with nothing to do (CTXBUS_KAFKA_FETCH_MAX_WAIT_MS): that CPU is a
    # cost per second, not per request, and is taken out of the load's
    idle_before = await _idle_cores(pids)
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    seen, stop = chaos_load.Watch(), asyncio.Event()
    watcher = asyncio.create_task(
        chaos_load.watch(config, (topics.context_injected,), topics.context_injected, seen, stop)
    )
    sent: dict[str, float] = {}
    try:
        async with EventPublisher(config, "bench-footprint") as publisher:
            started = time.perf_counter()
            for i, (domain, prompt) in enumerate(prompts(requests)):
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                event = chaos_load.chaos_request(i, PROJECT, domain, prompt)
                record = publisher.prepare(topics.retrieval_requested, event)
                if await chaos_load.send_until_acknowledged(publisher, record):
                    sent[str(event.correlation_id)] = time.perf_counter()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while any(cid not in seen.injected_at for cid in sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        load_s = time.perf_counter() - started
    finally:
        stop.set()
        await watcher
    answered = [cid for cid in sent if cid in seen.injected_at]
    cpu_load = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    # idle before and after the load: the lower one (start-up work left over inflates the first)
    idle_after = await _idle_cores(pids)
    idle_cores = {name: min(idle_before[name], idle_after[name]) for name in pids}
    cpu = {name: cpu_load[name] - idle_cores[name] * load_s for name in pids}
    after = {name: proc_status(pid) for name, pid in pids.items()}
    per_service = {
        name: {
            "rss_idle_mib": round(idle[name]["VmRSS"], 1),
            "rss_after_mib": round(after[name]["VmRSS"], 1),
            "peak_rss_mib": round(after[name]["VmHWM"], 1),
            "idle_cores": round(idle_cores[name], 3),
            # None: the work of the requests was below the noise of the idle polling taken out
            "cpu_ms_per_request": round(1000 * cpu[name] / len(answered), 2) if cpu[name] > 0 and answered else None,
            "requests_per_core_s": round(len(answered) / cpu[name], 1) if cpu[name] > 0 else None,
        }
        for name in pids
    }
    latency = [(seen.injected_at[cid] - t) * 1000 for cid, t in sent.items() if cid in seen.injected_at]
    return {
        "sent": len(sent),
        "answered": len(answered),
        "load_s": round(load_s, 1),
        "services": per_service,
        "end_to_end_ms": {k: round(v, 1) for k, v in summary(latency).items()},
    }


def run(memories: int, requests: int, rate: float, say: Callable[[str], None]) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="ctxbus-footprint-"))
    prefix = f"fp{uuid.uuid4().hex[:6]}"
    load_before = os.getloadavg()
    try:
        say(f"loading {memories} memories into {data_dir}")
        load_s = load_memories(Settings(data_dir=data_dir, topic_prefix=prefix), memories)
        store_mib = directory_mib(data_dir / "store")
        with EmbeddedBroker(log_file=data_dir / "broker.log") as broker:
            kafka = KafkaSettings(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
            config = KafkaClientConfig(kafka, broker.bootstrap_servers, embedded=True)
            procs = ServiceProcesses(service_env(data_dir, prefix, broker.bootstrap_servers), data_dir / "logs")
            try:
                say(f"memories loaded in {load_s:.0f} s; {requests} requests at {rate:g}/s")
                result = asyncio.run(_measure(procs, config, Topics(prefix), requests, rate))
            finally:
                procs.stop_all()
                procs.kill_all()
        return {
            "memories": memories,
            "rate_per_s": rate,
            "store_disk_mib": round(store_mib, 1),
            "memory_load_s": round(load_s, 1),
            **result,
            "load_average": {
                "before": [round(x, 1) for x in load_before],
                "after": [round(x, 1) for x in os.getloadavg()],
            },
            "cores": os.cpu_count(),
        }
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus footprint: {result['memories']} memories (store {result['store_disk_mib']} MiB on disk), "
        f"{result['answered']}/{result['sent']} requests answered at {result['rate_per_s']:g}/s; "
        f"load average {result['load_average']['before']} -> {result['load_average']['after']} "
        f"on {result['cores']} cores"
    )
    print(
        f"{'service':<10} {'RSS idle':>9} {'RSS after':>10} {'peak RSS':>9} {'idle cores':>11} {'CPU ms/req':>11} "
        f"{'req/s/core':>11}"
    )
    for name, s in result["services"].items():
        print(
            f"{name:<10} {s['rss_idle_mib']:>8.0f}M {s['rss_after_mib']:>9.0f}M {s['peak_rss_mib']:>8.0f}M "
            f"{s['idle_cores']:>11.3f} {_figure(s['cpu_ms_per_request']):>11} {_figure(s['requests_per_core_s']):>11}"
        )
    e2e = result["end_to_end_ms"]
    print(f"end to end p50 {e2e['p50']} ms, p99 {e2e['p99']} ms", file=sys.stdout)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
