"""``ctxbus bench recycle``: what ``ctxbus up``'s recycling of its embedded broker buys and costs.

The benchmark starts a stack (``ctxbus up``, the embedded broker, ``memories`` synthetic memories) whose recycle
limit is ``fill`` records and quiet time ``idle_s`` (:mod:`ctxbus.core.broker_recycle`), then times ``probes``
sequential requests of one session (request published -> its injected event read, one at a time, as a user's
prompts come) three times:

1. on the fresh broker;
2. after ``fill`` more requests of that session (published one a batch, as the gateway sends them) were answered:
   the partitions they went to hold that many more small batches;
3. after the stack, left quiet, recycled its broker.

It also reports how long the stack was not ready during the recycle (``/readyz`` on ``up``'s metrics port, polled
every 20 ms), and checks the recycle counter on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.error
import urllib.request
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.bus_tail import tail
from ctxbus.bench.hook_load import scrape
from ctxbus.bench.stack import PROJECT, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics

SESSION = "bench-recycle"
ANSWER_TIMEOUT_S = 30.0
POLL_S = 0.02
PROMPTS = (
    "How do we retry a failed payment capture?",
    "Add pagination to the invoices endpoint",
    "Why does the nightly export time out?",
    "Review the webhook signature check",
    "Where is the rate limiter configured?",
)


def _request(prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="bench", prompt=prompt, trigger=Trigger.USER_PROMPT)
    return Envelope.root(payload, project=PROJECT, session_id=SESSION, producer="bench-recycle")


async def probe(kafka: KafkaClientConfig, topics: Topics, count: int) -> list[float]:
    """``count`` requests one after the other: ms from publishing each to reading its injected event."""
    latencies: list[float] = []
    async with (
        tail(kafka, "bench-recycle-reader", (topics.context_injected,)) as reader,
        EventPublisher(kafka, "bench-recycle") as publisher,
    ):
        for i in range(count):
            event = _request(PROMPTS[i % len(PROMPTS)])
            wanted = str(event.correlation_id).encode()
            started = time.perf_counter()
            await publisher.publish(topics.retrieval_requested, event)
            deadline = started + ANSWER_TIMEOUT_S
            while not any(
                dict(r.headers).get("ctxbus-correlation-id") == wanted
                for records in (await reader.getmany(timeout_ms=200)).values()
                for r in records
            ):
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"request {i} was not answered within {ANSWER_TIMEOUT_S:g} s")
            latencies.append((time.perf_counter() - started) * 1000.0)
    return latencies


async def fill(kafka: KafkaClientConfig, topics: Topics, count: int, timeout_s: float) -> float:
    """Publish ``count`` requests of the session one at a time and wait until all are answered; seconds taken."""
    started = time.perf_counter()
    async with tail(kafka, "bench-recycle-reader", (topics.context_injected,)) as reader:
        async with EventPublisher(kafka, "bench-recycle") as publisher:
            for i in range(count):
                await publisher.publish(topics.retrieval_requested, _request(f"{PROMPTS[i % len(PROMPTS)]} ({i})"))
        answered = 0
        while answered < count:
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"{answered} of {count} requests answered within {timeout_s:g} s")
            answered += sum(len(r) for r in (await reader.getmany(timeout_ms=200, max_records=5_000)).values())
    return time.perf_counter() - started


def _ready(port: int) -> bool:
    """``/readyz`` on ``up``'s metrics port answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return int(response.status) == 200
    except urllib.error.HTTPError:
        return False


def recycles(port: int) -> float:
    """``ctxbus_embedded_broker_recycles_total`` on ``up``'s ``/metrics``."""
    return sum(scrape(port).get("ctxbus_embedded_broker_recycles_total", {}).values())


def wait_for_recycle(port: int, timeout_s: float) -> float | None:
    """Poll ``/readyz`` until the stack was not ready and is ready again after a recycle; the seconds not ready
    (None: the recycle was over before a poll saw it)."""
    deadline = time.monotonic() + timeout_s
    down_at: float | None = None
    while time.monotonic() < deadline:
        ready = _ready(port)
        now = time.monotonic()
        if not ready and down_at is None:
            down_at = now
        elif ready and recycles(port) >= 1:
            return None if down_at is None else now - down_at
        time.sleep(POLL_S)
    raise RuntimeError(f"the stack did not recycle its broker within {timeout_s:g} s")


def figures(latencies: list[float]) -> dict[str, float]:
    """p50 / p95 / p99 / max and the mean of one phase's latencies (ms, 2 decimals)."""
    return {k: round(v, 2) for k, v in {**summary(latencies), "mean": statistics.fmean(latencies)}.items()}


def run(*, memories: int, fill_requests: int, idle_s: float, probes: int) -> dict[str, Any]:
    env = {
        "CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS": str(fill_requests),
        "CTXBUS_KAFKA_EMBEDDED_RECYCLE_IDLE_S": str(idle_s),
    }
    with bench_stack(memories, **env) as stack:
        topics = Topics(stack.settings.topic_prefix)
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        port, first_broker = int(runtime["metrics_port"]), runtime["broker_pid"]
        fresh = asyncio.run(probe(stack.kafka, topics, probes))
        fill_s = asyncio.run(fill(stack.kafka, topics, fill_requests, timeout_s=max(120.0, fill_requests / 10)))
        filled = asyncio.run(probe(stack.kafka, topics, probes))
        down_s = wait_for_recycle(port, timeout_s=idle_s + 120.0)
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        recycled = asyncio.run(probe(stack.kafka, topics, probes))
        return {
            "memories": memories,
            "fill_requests": fill_requests,
            "idle_s": idle_s,
            "probes": probes,
            "fill_s": round(fill_s, 2),
            "fresh_ms": figures(fresh),
            "filled_ms": figures(filled),
            "recycled_ms": figures(recycled),
            "not_ready_s": None if down_s is None else round(down_s, 2),
            "broker_replaced": runtime["broker_pid"] != first_broker,
            "recycles": recycles(port),
        }


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus bench recycle: {result['memories']} memories, {result['probes']} sequential requests of one "
        f"session per phase; recycle limit {result['fill_requests']} records, {result['idle_s']:g} s quiet"
    )
    rows = (
        ("fresh broker", "fresh_ms"),
        (f"after {result['fill_requests']} requests ({result['fill_s']:.1f} s)", "filled_ms"),
        ("after the recycle", "recycled_ms"),
    )
    for label, key in rows:
        f = result[key]
        print(
            f"  {label:<34} p50 {f['p50']:7.2f}  mean {f['mean']:7.2f}  p95 {f['p95']:7.2f}  "
            f"p99 {f['p99']:7.2f}  max {f['max']:7.2f} ms"
        )
    replaced = "a new broker process" if result["broker_replaced"] else "THE SAME broker process (no recycle?)"
    down = result["not_ready_s"]
    not_ready = "not seen by a poll" if down is None else f"{down:.2f} s"
    counted = f"recycles on /metrics: {result['recycles']:g}"
    print(f"  recycle: the stack was not ready for {not_ready}; {replaced}; {counted}")
