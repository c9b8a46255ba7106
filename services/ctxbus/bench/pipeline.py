"""``ctxbus bench pipeline``: the whole stack on the embedded default, under a steady request rate.

Loads N memories into a fresh data directory, starts ``ctxbus up`` as its own
process (embedded broker, retriever, injector, recorder), sends requests
open-loop at a fixed rate from this process, and reports end-to-end latency
(request sent -> injected event received), per-stage latency from the events'
own timestamps, throughput, lost requests and peak RSS.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.bus_tail import tail
from ctxbus.bench.corpus import prompts
from ctxbus.bench.cpu import CpuMeter, beyond_idle, core_share, per_request
from ctxbus.bench.stack import PROJECT, STARTUP_TIMEOUT_S, bench_stack
from ctxbus.bench.stats import child_pids, peak_rss_mb, summary
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics

#: How long to wait for the last answers once sending stops.
DRAIN_S = 10.0
#: How long the idle stack's CPU use is measured before the load starts.
IDLE_S = 3.0


@dataclass
class Observed:
    sent_at: dict[str, float] = field(default_factory=dict)
    request_emitted: dict[str, float] = field(default_factory=dict)
    completed_at: dict[str, float] = field(default_factory=dict)
    injected: dict[str, tuple[float, float, ContextInjected]] = field(default_factory=dict)  # recv, emitted, payload


async def _receive(
    config: KafkaClientConfig,
    topics: Topics,
    current: Callable[[], Observed],
    ready: asyncio.Event,
    stop: asyncio.Event,
) -> None:
    """Note every completion and injection from the end of the topics on, in ``current()`` (a step's record)."""
    deserialize = EventDeserializer()
    async with tail(config, "bench-reader", (topics.retrieval_completed, topics.context_injected)) as consumer:
        ready.set()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            seen = current()
            for records in batch.values():
                for rec in records:
                    event = deserialize(rec.value)
                    cid = str(event.correlation_id)
                    if isinstance(event.payload, RetrievalCompleted):
                        seen.completed_at[cid] = event.emitted_at.timestamp()
                    elif isinstance(event.payload, ContextInjected):
                        seen.injected.setdefault(cid, (now, event.emitted_at.timestamp(), event.payload))


def _request(i: int, domain: str, prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(
        agent_name="bench", domain=domain, prompt=prompt, trigger=Trigger.USER_PROMPT, max_items=5
    )
    return Envelope.root(payload, project=PROJECT, session_id=f"bench-{i % 16}", producer="bench")


@dataclass
class Step:
    """One load step: what was seen, how many were sent, its CPU meter, when sending started."""

    seen: Observed
    total: int
    busy: CpuMeter
    started: float
    duration_s: float


class Driver:
    """The benchmark client: a publisher and a reader of completions and injections, open across load steps."""

    def __init__(self, config: KafkaClientConfig, topics: Topics, pids: dict[str, int]) -> None:
        self._config, self._topics, self._pids = config, topics, pids
        self.seen = Observed()
        self._stop = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._publisher = EventPublisher(config, "bench")
        self._sent = 0  # requests sent so far (prompt numbers go on across steps)

    async def __aenter__(self) -> Driver:
        ready = asyncio.Event()
        self._reader = asyncio.create_task(_receive(self._config, self._topics, lambda: self.seen, ready, self._stop))
        await asyncio.wait_for(ready.wait(), STARTUP_TIMEOUT_S)
        await self._publisher.start()
        # warm up: until one request makes the whole round trip (consumer groups joined)
        warm_deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            warm = _request(-1, "auth", "warm up the pipeline")
            await self._publisher.publish(self._topics.retrieval_requested, warm)
            t0 = time.monotonic()
            while str(warm.correlation_id) not in self.seen.injected and time.monotonic() - t0 < 2.0:
                await asyncio.sleep(0.01)
            if str(warm.correlation_id) in self.seen.injected or time.monotonic() > warm_deadline:
                break
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._publisher.stop()
        self._stop.set()
        if self._reader is not None:
            await self._reader

    async def idle(self, seconds: float) -> CpuMeter:
        meter = CpuMeter(self._pids, threads_of="stack")
        meter.start()
        await asyncio.sleep(seconds)
        meter.stop()
        return meter

    async def step(self, rate: float, duration_s: float, *, distinct: bool = False, drain_s: float = DRAIN_S) -> Step:
        """Send ``rate`` requests a second for ``duration_s`` (open loop), then wait up to ``drain_s`` for the
        last answers. ``distinct``: every prompt made unique (no prompt is asked twice)."""
        self.seen = seen = Observed()
        total = int(rate * duration_s)
        work = prompts(self._sent + total)[self._sent :]
        busy = CpuMeter(self._pids, threads_of="stack")
        busy.start()
        start = time.perf_counter()
        sends = []
        for i, (domain, prompt) in enumerate(work):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            n = self._sent + i
            event = _request(n, domain, f"{prompt} (case {n})" if distinct else prompt)
            cid = str(event.correlation_id)
            seen.sent_at[cid] = time.perf_counter()
            seen.request_emitted[cid] = event.emitted_at.timestamp()
            sends.append(asyncio.create_task(self._publisher.publish(self._topics.retrieval_requested, event)))
        await asyncio.gather(*sends)
        self._sent += total
        deadline = time.perf_counter() + drain_s
        while time.perf_counter() < deadline and not seen.sent_at.keys() <= seen.injected.keys():
            await asyncio.sleep(0.05)
        busy.stop()
        return Step(seen, total, busy, start, duration_s)

    async def settle(self, timeout_s: float) -> bool:
        """Wait until every request sent so far is answered (a step's backlog cleared); False if it is not."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.seen.sent_at.keys() <= self.seen.injected.keys():
                return True
            await asyncio.sleep(0.1)
        return False


async def _drive(
    config: KafkaClientConfig,
    topics: Topics,
    rate: float,
    duration_s: float,
    pids: dict[str, int],
    distinct: bool = False,
) -> tuple[Step, CpuMeter]:
    async with Driver(config, topics, pids) as driver:
        idle = await driver.idle(IDLE_S)
        step = await driver.step(rate, duration_s, distinct=distinct)
    return step, idle


def report(seen: Observed, total: int, duration_s: float, started: float | None = None) -> dict[str, Any]:
    """The step's figures; throughput is what was answered over the time until the last answer (at least the
    step's duration: a pipeline that falls behind and catches up in the drain does not count as keeping up)."""
    answered = [cid for cid in seen.sent_at if cid in seen.injected]
    if started is not None and answered:
        duration_s = max(duration_s, max(seen.injected[c][0] for c in answered) - started)
    e2e = [(seen.injected[c][0] - seen.sent_at[c]) * 1000 for c in answered]
    retr = [(seen.completed_at[c] - seen.request_emitted[c]) * 1000 for c in answered if c in seen.completed_at]
    inj = [(seen.injected[c][1] - seen.completed_at[c]) * 1000 for c in answered if c in seen.completed_at]
    work = [float(seen.injected[c][2].retrieval_duration_ms) for c in answered]
    return {
        "sent": total,
        "answered": len(answered),
        "lost": total - len(answered),
        "throughput_per_s": len(answered) / duration_s if duration_s else 0.0,
        "end_to_end_ms": summary(e2e),
        "stage_request_to_completed_ms": summary(retr),
        "stage_completed_to_injected_ms": summary(inj),
        "retrieval_work_ms": summary(work),
        "empty_injections": sum(1 for c in answered if not seen.injected[c][2].item_ids),
    }


def cpu_report(seen: Observed, idle: CpuMeter | None, busy: CpuMeter) -> dict[str, Any]:
    """CPU ms per answered request of each process (and of the stack's event-loop thread and other threads),
    the share of a core each used under the load, and idle (before the load)."""
    answered = sum(1 for cid in seen.sent_at if cid in seen.injected)
    threads = {f"stack {k}": v for k, v in busy.threads_used_s.items()}
    used = {**busy.used_s, **threads}
    out = {
        "cpu_ms_per_request": per_request(busy.used_s, answered, parts=threads),
        "cpu_core_percent_loaded": core_share(used, busy.elapsed_s),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    if idle is not None:
        idle_used = {**idle.used_s, **{f"stack {k}": v for k, v in idle.threads_used_s.items()}}
        out["cpu_core_percent_idle"] = core_share(idle_used, idle.elapsed_s)
        out["cpu_ms_per_request_beyond_idle"] = per_request(beyond_idle(busy, idle), answered)
    return out


def stack_pids(stack_pid: int) -> dict[str, int]:
    """The stack (``ctxbus up``: the gateway and the services it runs itself), its broker, the child process(es)
    it runs services in (``child``: the injector and recorder, with ``CTXBUS_UP_PROCESSES`` 2 or more), and this
    benchmark client."""
    pids = {"stack": stack_pid, "client": os.getpid()}
    brokers = children = 0
    for pid in child_pids(stack_pid):
        if is_service_child(pid):
            pids["child" if children == 0 else f"child{children}"] = pid
            children += 1
        else:
            pids["broker" if brokers == 0 else f"broker{brokers}"] = pid
            brokers += 1
    return pids


def is_service_child(pid: int) -> bool:
    """Whether a child of ``ctxbus up`` is one of its service processes (else: its embedded broker)."""
    try:
        return b"ctxbus.cli.up_child" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run(memories_count: int, rate: float, duration_s: float, *, distinct: bool = False) -> dict[str, Any]:
    with bench_stack(memories_count) as stack:
        pids = stack_pids(stack.proc.pid)
        step, idle = asyncio.run(
            _drive(stack.kafka, Topics(stack.settings.topic_prefix), rate, duration_s, pids, distinct)
        )
        result = report(step.seen, step.total, duration_s, step.started)
        result.update(cpu_report(step.seen, idle, step.busy))
        result["peak_rss_mb"] = {
            "stack": peak_rss_mb(stack.proc.pid),
            "broker": sum(peak_rss_mb(p) or 0.0 for n, p in pids.items() if n.startswith("broker")),
            "child": sum(peak_rss_mb(p) or 0.0 for n, p in pids.items() if n.startswith("child")),
            "bench_client": peak_rss_mb(os.getpid()),
        }
    result.update(
        {
            "memories": memories_count,
            "rate_per_s": rate,
            "duration_s": duration_s,
            "memory_load_s": round(stack.memory_load_s, 1),
            "distinct_prompts": distinct,
        }
    )
    return result


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus bench pipeline: {result['memories']} memories, {result['rate_per_s']:g} req/s for "
        f"{result['duration_s']:g} s (memories loaded in {result['memory_load_s']} s)"
    )
    print(
        f"  sent {result['sent']}, answered {result['answered']}, lost {result['lost']}, "
        f"throughput {result['throughput_per_s']:.1f}/s, empty injections {result['empty_injections']}"
    )
    for key, label in (
        ("end_to_end_ms", "end to end (sent -> injected received)"),
        ("stage_request_to_completed_ms", "stage request -> completed (retriever)"),
        ("stage_completed_to_injected_ms", "stage completed -> injected (injector)"),
        ("retrieval_work_ms", "retrieval work (embed + search + rank)"),
    ):
        s = result[key]
        print(f"  {label:44s} p50 {s['p50']:7.2f}  p95 {s['p95']:7.2f}  p99 {s['p99']:7.2f}  max {s['max']:7.2f} ms")
    cpu = result["cpu_ms_per_request"]
    if cpu:
        loaded, idle = result["cpu_core_percent_loaded"], result.get("cpu_core_percent_idle", {})
        print(
            "  CPU ms/request: "
            + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
            + f" (load average {result['loadavg_1min']})"
        )
        beyond = result.get("cpu_ms_per_request_beyond_idle", {})
        if beyond:
            print("  CPU ms/request beyond idle: " + ", ".join(f"{k} {v:.2f}" for k, v in beyond.items()))
        print("  % of a core under load: " + ", ".join(f"{k} {v:.0f}" for k, v in loaded.items()))
        print("  % of a core idle:       " + ", ".join(f"{k} {v:.0f}" for k, v in idle.items()))
    rss = result["peak_rss_mb"]
    print(
        f"  peak RSS: stack {rss['stack'] or 0:.0f} MiB, broker {rss['broker']:.0f} MiB, "
        + (f"child {rss['child']:.0f} MiB, " if rss.get("child") else "")
        + f"bench client {rss['bench_client'] or 0:.0f} MiB"
    )
