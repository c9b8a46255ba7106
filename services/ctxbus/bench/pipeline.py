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
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.corpus import prompts
from ctxbus.bench.cpu import CpuMeter, core_share, per_request
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
    config: KafkaClientConfig, topics: Topics, seen: Observed, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    consumer = AIOKafkaConsumer(**config.consumer("bench-reader", None))
    await consumer.start()
    deserialize = EventDeserializer()
    try:
        await consumer.topics()
        tps = [
            TopicPartition(t, p)
            for t in (topics.retrieval_completed, topics.context_injected)
            for p in sorted(consumer.partitions_for_topic(t) or ())
        ]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        ready.set()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            for records in batch.values():
                for rec in records:
                    event = deserialize(rec.value)
                    cid = str(event.correlation_id)
                    if isinstance(event.payload, RetrievalCompleted):
                        seen.completed_at[cid] = event.emitted_at.timestamp()
                    elif isinstance(event.payload, ContextInjected):
                        seen.injected.setdefault(cid, (now, event.emitted_at.timestamp(), event.payload))
    finally:
        await consumer.stop()


def _request(i: int, domain: str, prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(
        agent_name="bench", domain=domain, prompt=prompt, trigger=Trigger.USER_PROMPT, max_items=5
    )
    return Envelope.root(payload, project=PROJECT, session_id=f"bench-{i % 16}", producer="bench")


async def _drive(
    config: KafkaClientConfig, topics: Topics, rate: float, duration_s: float, pids: dict[str, int]
) -> tuple[Observed, int, CpuMeter, CpuMeter]:
    seen = Observed()
    ready, stop = asyncio.Event(), asyncio.Event()
    reader = asyncio.create_task(_receive(config, topics, seen, ready, stop))
    await asyncio.wait_for(ready.wait(), STARTUP_TIMEOUT_S)
    async with EventPublisher(config, "bench") as publisher:
        # warm up: until one request makes the whole round trip (consumer groups joined)
        warm_deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            warm = _request(-1, "auth", "warm up the pipeline")
            await publisher.publish(topics.retrieval_requested, warm)
            t0 = time.monotonic()
            while str(warm.correlation_id) not in seen.injected and time.monotonic() - t0 < 2.0:
                await asyncio.sleep(0.01)
            if str(warm.correlation_id) in seen.injected or time.monotonic() > warm_deadline:
                break
        warm_ids = set(seen.injected)
        idle = CpuMeter(pids, threads_of="stack")
        idle.start()
        await asyncio.sleep(IDLE_S)
        idle.stop()
        total = int(rate * duration_s)
        work = prompts(total)
        busy = CpuMeter(pids, threads_of="stack")
        busy.start()
        start = time.perf_counter()
        sends = []
        for i, (domain, prompt) in enumerate(work):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            event = _request(i, domain, prompt)
            cid = str(event.correlation_id)
            seen.sent_at[cid] = time.perf_counter()
            seen.request_emitted[cid] = event.emitted_at.timestamp()
            sends.append(asyncio.create_task(publisher.publish(topics.retrieval_requested, event)))
        await asyncio.gather(*sends)
        deadline = time.perf_counter() + DRAIN_S
        while time.perf_counter() < deadline and not set(seen.sent_at) <= set(seen.injected):
            await asyncio.sleep(0.05)
        busy.stop()
    stop.set()
    await reader
    for cid in warm_ids:
        seen.injected.pop(cid, None)
    return seen, total, idle, busy


def report(seen: Observed, total: int, duration_s: float) -> dict[str, Any]:
    answered = [cid for cid in seen.sent_at if cid in seen.injected]
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


def cpu_report(seen: Observed, idle: CpuMeter, busy: CpuMeter) -> dict[str, Any]:
    """CPU ms per answered request of each process (and of the stack's event-loop thread and other threads),
    the share of a core each used under the load, and idle (before the load)."""
    answered = sum(1 for cid in seen.sent_at if cid in seen.injected)
    threads = {f"stack {k}": v for k, v in busy.threads_used_s.items()}
    used = {**busy.used_s, **threads}
    idle_used = {**idle.used_s, **{f"stack {k}": v for k, v in idle.threads_used_s.items()}}
    return {
        "cpu_ms_per_request": per_request(busy.used_s, answered, parts=threads),
        "cpu_core_percent_loaded": core_share(used, busy.elapsed_s),
        "cpu_core_percent_idle": core_share(idle_used, idle.elapsed_s),
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }


def stack_pids(stack_pid: int) -> dict[str, int]:
    """The stack (``ctxbus up``: every service and the gateway), its broker, and this benchmark client."""
    pids = {"stack": stack_pid, "client": os.getpid()}
    for i, child in enumerate(child_pids(stack_pid)):
        pids["broker" if i == 0 else f"broker{i}"] = child
    return pids


def run(memories_count: int, rate: float, duration_s: float) -> dict[str, Any]:
    with bench_stack(memories_count) as stack:
        pids = stack_pids(stack.proc.pid)
        seen, total, idle, busy = asyncio.run(
            _drive(stack.kafka, Topics(stack.settings.topic_prefix), rate, duration_s, pids)
        )
        result = report(seen, total, duration_s)
        result.update(cpu_report(seen, idle, busy))
        result["peak_rss_mb"] = {
            "stack": peak_rss_mb(stack.proc.pid),
            "broker": sum(peak_rss_mb(c) or 0.0 for c in child_pids(stack.proc.pid)),
            "bench_client": peak_rss_mb(os.getpid()),
        }
    result.update(
        {
            "memories": memories_count,
            "rate_per_s": rate,
            "duration_s": duration_s,
            "memory_load_s": round(stack.memory_load_s, 1),
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
        loaded, idle = result["cpu_core_percent_loaded"], result["cpu_core_percent_idle"]
        print(
            "  CPU ms/request: "
            + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
            + f" (load average {result['loadavg_1min']})"
        )
        print("  % of a core under load: " + ", ".join(f"{k} {v:.0f}" for k, v in loaded.items()))
        print("  % of a core idle:       " + ", ".join(f"{k} {v:.0f}" for k, v in idle.items()))
    rss = result["peak_rss_mb"]
    print(
        f"  peak RSS: stack {rss['stack'] or 0:.0f} MiB, broker {rss['broker']:.0f} MiB, "
        f"bench client {rss['bench_client'] or 0:.0f} MiB"
    )
