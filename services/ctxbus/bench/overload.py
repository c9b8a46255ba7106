"""``ctxbus bench overload``: the embedded stack driven past its capacity by hook calls with deadlines.

Starts ``ctxbus up`` (broker, services, gateway) over N memories, measures the pipeline's capacity
(a burst of requests without deadlines, answered as fast as it can) unless given, then makes
``UserPromptSubmit`` hook calls through the gateway exactly as ``ctxbus hook`` does (its remaining
budget in ``X-Ctxbus-Timeout-Ms``), open-loop at ``factor`` x capacity for ``duration`` seconds, and
stops. It reports every call's latency against the hook's timeout, what the calls got (the
pipeline's context, the pattern-file fallback, nothing), what the pipeline did with the requests
(answered with context, expired by the retriever or the injector), the consumer lag, and the time
from the end of the load until the last request on the bus was answered (the backlog cleared).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.corpus import prompts
from ctxbus.bench.hook_load import (
    CONTEXT,
    EMPTY,
    ERROR,
    FALLBACK,
    BusWatch,
    HookCall,
    by_label,
    hook_call,
    lag_of,
    scrape,
    watch_bus,
)
from ctxbus.bench.stack import PROJECT, STARTUP_TIMEOUT_S, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import EXPIRED
from ctxbus.hooks.client import FALLBACK_RESERVE_S
from ctxbus.hooks.wire import read_secret

#: requests in the capacity burst, and how long it may take (what is not served by then expires)
CAPACITY_REQUESTS = 300
CAPACITY_WINDOW_S = 30.0
#: how long the backlog may take to clear before the benchmark stops watching
CLEAR_WATCH_S = 120.0
#: the issue's target for the backlog to clear after the load stops
CLEAR_TARGET_S = 10.0
#: the pattern-file fallback of the benchmark's repository holds this (how fallback answers are told apart)
MARKER = "ctxbus-overload-fallback-marker"


def _fallback_repo(root: Path) -> Path:
    """A repository of the benchmark's project (``.claude/ctxbus.json``: the gateway takes the project from the
    caller's directory) whose learned-pattern file marks every answer the gateway gives from it."""
    repo = root / "overload-repo"
    (repo / ".claude").mkdir(parents=True, exist_ok=True)
    (repo / ".claude" / "ctxbus.json").write_text(json.dumps({"project": PROJECT}))
    pattern = {
        "pattern_id": "overload-fallback",
        "domain": "general",
        "title": f"Fallback pattern {MARKER}",
        "description": "Answered from the learned-pattern file because the pipeline could not answer in time.",
        "confidence": 0.95,
    }
    (repo / ".claude" / "learned_patterns.json").write_text(json.dumps({"version": "1.0.0", "patterns": [pattern]}))
    return repo


def _request(i: int, domain: str, prompt: str, deadline: datetime | None = None) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(
        agent_name="bench", domain=domain, prompt=prompt, trigger=Trigger.USER_PROMPT, deadline=deadline
    )
    return Envelope.root(payload, project=PROJECT, session_id=f"capacity-{i % 16}", producer="bench")


async def _measure_capacity(config: KafkaClientConfig, topics: Topics, seen: BusWatch) -> tuple[float, int]:
    """Requests served per second when a burst is answered as fast as it can be (the burst has a deadline
    CAPACITY_WINDOW_S away, so a slow pipeline serves what it can in that time and expires the rest)."""
    async with EventPublisher(config, "bench-capacity") as publisher:
        warm = _request(-1, "auth", "warm up the pipeline")  # until one request makes the whole round trip
        until = time.monotonic() + STARTUP_TIMEOUT_S
        await publisher.publish(topics.retrieval_requested, warm)
        while str(warm.correlation_id) not in seen.injected and time.monotonic() < until:
            await asyncio.sleep(0.01)
        deadline = datetime.now(UTC) + timedelta(seconds=CAPACITY_WINDOW_S)
        burst = [_request(i, d, p, deadline) for i, (d, p) in enumerate(prompts(CAPACITY_REQUESTS))]
        started = time.monotonic()
        await asyncio.gather(*(publisher.publish(topics.retrieval_requested, r) for r in burst))
    ids = [str(r.correlation_id) for r in burst]
    until = time.monotonic() + CAPACITY_WINDOW_S + CLEAR_WATCH_S
    while any(c not in seen.injected for c in ids) and time.monotonic() < until:
        await asyncio.sleep(0.05)
    served = [seen.injected[c][0] for c in ids if c in seen.injected and seen.injected[c][1] != EXPIRED]
    if not served:
        return 0.0, 0
    return len(served) / max(1e-3, max(served) - started), len(served)


def _hook_body(i: int, prompt: str, repo: Path) -> bytes:
    hook_input = {
        "session_id": f"overload-{i % 64}",
        "transcript_path": "/dev/null",
        "cwd": str(repo),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    return json.dumps(hook_input).encode()


async def _sample_lag(metrics_ports: list[int], stop: asyncio.Event, peaks: dict[str, float]) -> None:
    while not stop.is_set():
        scraped = await asyncio.to_thread(scrape, *metrics_ports)
        for service in ("retriever", "injector"):
            peaks[service] = max(peaks.get(service, 0.0), lag_of(scraped, service))
        await asyncio.sleep(1.0)


async def _drive(stack_data: Path, config: KafkaClientConfig, topics: Topics, opts: dict[str, Any]) -> dict[str, Any]:
    runtime = json.loads((stack_data / "runtime.json").read_text())
    # up's /metrics serves its children's series too: summing the children's own ports as well would count twice
    gateway_port, ports = int(runtime["gateway_port"]), [int(runtime["metrics_port"])]
    secret = read_secret({}, str(stack_data))
    if secret is None:
        raise RuntimeError(f"the stack left no gateway secret under {stack_data}")
    repo = _fallback_repo(stack_data)
    seen = BusWatch()
    ready, stop = asyncio.Event(), asyncio.Event()
    watcher = asyncio.create_task(watch_bus(config, topics, seen, ready, stop))
    await asyncio.wait_for(ready.wait(), STARTUP_TIMEOUT_S)
    capacity, capacity_answered = opts["capacity"], 0
    if capacity is None:
        capacity, capacity_answered = await _measure_capacity(config, topics, seen)
        if capacity <= 0:
            raise RuntimeError("the pipeline answered nothing while measuring its capacity")
    rate = opts["rate"] or opts["factor"] * capacity
    before = await asyncio.to_thread(scrape, *ports)
    seen.requested.clear()
    seen.injected.clear()

    timeout_s = opts["timeout_ms"] / 1000.0
    budget_ms = int((timeout_s - FALLBACK_RESERVE_S) * 1000)  # what the hook client hands the gateway
    total = max(1, int(rate * opts["duration"]))
    work = prompts(total)
    lag_peaks: dict[str, float] = {}
    lag_stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_lag(ports, lag_stop, lag_peaks))
    calls: list[asyncio.Task[HookCall]] = []
    load_started = time.monotonic()
    for i, (_domain, prompt) in enumerate(work):
        delay = load_started + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        body = _hook_body(i, prompt, repo)
        calls.append(asyncio.create_task(hook_call(gateway_port, secret, body, budget_ms, MARKER, timeout_s + 5.0)))
    load_stopped = time.monotonic()
    results = await asyncio.gather(*calls)
    # the backlog: every request the gateway published, until each has its injection
    until = time.monotonic() + CLEAR_WATCH_S
    while time.monotonic() < until:
        pending = seen.unanswered()
        if not pending:
            await asyncio.sleep(0.5)  # a request still on its way would show up by now
            if not seen.unanswered():
                break
        await asyncio.sleep(0.05)
    lag_stop.set()
    await sampler
    after = await asyncio.to_thread(scrape, *ports)
    stop.set()
    await watcher
    return _figures(
        results,
        seen,
        before,
        after,
        capacity=capacity,
        capacity_measured=capacity_answered > 0,
        rate=rate,
        timeout_s=timeout_s,
        budget_s=budget_ms / 1000.0,
        load_started=load_started,
        load_stopped=load_stopped,
        lag_peaks=lag_peaks,
    )


def _means(before: Any, after: Any, histogram: str, label: str) -> dict[str, float]:
    """Mean of a histogram during the load (from its _sum and _count), by one label, in ms."""
    sums = _delta_f(by_label(before, f"{histogram}_sum", label), by_label(after, f"{histogram}_sum", label))
    counts = _delta_f(by_label(before, f"{histogram}_count", label), by_label(after, f"{histogram}_count", label))
    return {k: round(sums.get(k, 0.0) / n * 1000, 1) for k, n in sorted(counts.items()) if n > 0}


def _delta_f(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {k: round(v - before.get(k, 0.0)) for k, v in sorted(after.items()) if round(v - before.get(k, 0.0))}


def _figures(
    results: list[HookCall],
    seen: BusWatch,
    before: Any,
    after: Any,
    *,
    capacity: float,
    capacity_measured: bool,
    rate: float,
    timeout_s: float,
    budget_s: float,
    load_started: float,
    load_stopped: float,
    lag_peaks: dict[str, float],
) -> dict[str, Any]:
    latencies = [c.latency_s * 1000 for c in results]
    kinds = Counter(c.kind for c in results)
    answers = [seen.injected[c] for c in seen.requested if c in seen.injected]
    last_answer = max((at for at, _ in answers), default=math.nan)
    unanswered = seen.unanswered()
    clear_s = None if unanswered else max(0.0, last_answer - load_stopped) if answers else 0.0
    reasons = Counter(reason or "with_context" for _, reason in answers)
    timeline = []
    for start in range(0, math.ceil(load_stopped - load_started), 10):
        window = [c for c in results if start <= c.sent_at - load_started < start + 10]
        if window:
            timeline.append(
                {
                    "from_s": start,
                    "calls": len(window),
                    "context": sum(c.kind == CONTEXT for c in window),
                    "p50_ms": summary([c.latency_s * 1000 for c in window])["p50"],
                }
            )
    return {
        "capacity_per_s": round(capacity, 1),
        "capacity_measured": capacity_measured,
        "rate_per_s": round(rate, 1),
        "duration_s": round(load_stopped - load_started, 1),
        "hook_timeout_ms": round(timeout_s * 1000),
        "gateway_budget_ms": round(budget_s * 1000),
        "calls": len(results),
        "latency_ms": summary(latencies),
        "over_timeout": sum(c.latency_s > timeout_s for c in results),
        "over_gateway_budget": sum(c.latency_s > budget_s for c in results),
        "answers": {k: kinds.get(k, 0) for k in (CONTEXT, FALLBACK, EMPTY, ERROR)},
        "errors": sorted({c.error for c in results if c.error})[:5],
        "gateway_outcomes": _delta(
            by_label(before, "ctxbus_gateway_requests_total", "outcome", event="UserPromptSubmit"),
            by_label(after, "ctxbus_gateway_requests_total", "outcome", event="UserPromptSubmit"),
        ),
        "requests_on_bus": len(seen.requested),
        "injections": dict(reasons),
        "expired_by_service": _delta(
            by_label(before, "ctxbus_requests_expired_total", "service"),
            by_label(after, "ctxbus_requests_expired_total", "service"),
        ),
        "peak_lag": {k: round(v) for k, v in sorted(lag_peaks.items())},
        "stage_mean_ms": _means(before, after, "ctxbus_stage_seconds", "stage"),
        "processing_mean_ms": _means(before, after, "ctxbus_processing_seconds", "service"),
        "unanswered": unanswered,
        "backlog_clear_s": None if clear_s is None else round(clear_s, 2),
        "clear_target_s": CLEAR_TARGET_S,
        "timeline": timeline,
    }


def run(
    memories_count: int,
    *,
    duration_s: float,
    rate: float | None = None,
    capacity: float | None = None,
    factor: float = 3.0,
    timeout_ms: int = 2_000,
) -> dict[str, Any]:
    opts = {"duration": duration_s, "rate": rate, "capacity": capacity, "factor": factor, "timeout_ms": timeout_ms}
    # the stack's hook settings are the client's: the gateway takes the budget the calls give it
    with bench_stack(memories_count, CTXBUS_HOOK_TIMEOUT_MS=str(timeout_ms)) as stack:
        result = asyncio.run(_drive(stack.settings.data_dir, stack.kafka, Topics(stack.settings.topic_prefix), opts))
    result["memories"] = memories_count
    return result


def passed(result: dict[str, Any]) -> bool:
    """Every call answered validly within its timeout, and the backlog cleared within the target."""
    clear = result["backlog_clear_s"]
    return (
        result["over_timeout"] == 0
        and result["answers"][ERROR] == 0
        and clear is not None
        and clear <= result["clear_target_s"]
    )


def print_report(result: dict[str, Any]) -> None:
    cap = "measured" if result["capacity_measured"] else "given"
    print(
        f"ctxbus bench overload: {result['memories']} memories, capacity {result['capacity_per_s']}/s ({cap}), "
        f"load {result['rate_per_s']}/s for {result['duration_s']} s; hook timeout {result['hook_timeout_ms']} ms "
        f"(the gateway gets {result['gateway_budget_ms']} ms)"
    )
    s = result["latency_ms"]
    print(
        f"  hook calls {result['calls']}: latency p50 {s['p50']:.0f}  p95 {s['p95']:.0f}  p99 {s['p99']:.0f}  "
        f"max {s['max']:.0f} ms; over the timeout {result['over_timeout']}, over the gateway's budget "
        f"{result['over_gateway_budget']}"
    )
    a = result["answers"]
    print(
        f"  answers: pipeline context {a[CONTEXT]}, pattern-file fallback {a[FALLBACK]}, empty {a[EMPTY]}, "
        f"errors {a[ERROR]}" + (f" ({'; '.join(result['errors'])})" if result["errors"] else "")
    )
    print(f"  gateway outcomes: {result['gateway_outcomes']}")
    print(
        f"  on the bus: {result['requests_on_bus']} requests, injections {result['injections']}; "
        f"expired by {result['expired_by_service']}; peak consumer lag {result['peak_lag']}"
    )
    print(f"  mean during the load: stages {result['stage_mean_ms']} ms, per event {result['processing_mean_ms']} ms")
    clear = result["backlog_clear_s"]
    verdict = "met" if clear is not None and clear <= result["clear_target_s"] else "missed"
    shown = f"{clear} s" if clear is not None else f"not cleared ({result['unanswered']} unanswered)"
    print(f"  backlog cleared after the load stopped: {shown} (target <= {result['clear_target_s']:g} s: {verdict})")
    for w in result["timeline"]:
        print(f"    t+{w['from_s']:>3} s: {w['calls']} calls, {w['context']} with context, p50 {w['p50_ms']:.0f} ms")
