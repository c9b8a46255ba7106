"""``ctxbus bench adversarial``: 100,000-character prompts amid normal traffic, on the embedded stack.

Issue 10 found that one 100,000-character prompt without spaces (a pasted hex blob) stalled the
retriever for 31 s, and the gateway, ``/metrics`` and every consumer with it. This benchmark loads N
memories, starts ``ctxbus up`` as its own process (as ``bench pipeline`` does), sends normal requests
open-loop at a steady rate and, every few seconds, one large prompt; meanwhile it asks the gateway
(``/healthz``) and ``/metrics`` every 50 ms. It reports the large prompts' end-to-end latency (request
sent -> injected event received), the normal requests' latency while a large prompt was in flight and
otherwise, the probes' latency, lost requests and the machine's load average (a shared machine's
figures are noisy).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.corpus import prompts
from ctxbus.bench.pipeline import DRAIN_S, Observed, _receive, _request
from ctxbus.bench.stack import STARTUP_TIMEOUT_S, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.contract.payloads import MAX_PROMPT_CHARS
from ctxbus.contract.topics import Topics

#: what a large prompt is made of
KINDS = ("hex", "paths", "words")
#: seconds between probes of the gateway and of /metrics
PROBE_EVERY_S = 0.05
#: a probe that takes longer than this has failed
PROBE_TIMEOUT_S = 10.0


def large_prompt(kind: str, chars: int, seed: int = 0) -> str:
    """``chars`` characters of a pasted blob: ``hex`` (no spaces: issue 10's case), ``paths`` (path-like
    garbage, dots and slashes) or ``words`` (prose with file names)."""
    rng = random.Random(seed)
    if kind == "hex":
        return "".join(rng.choice("0123456789abcdef") for _ in range(chars))
    if kind == "paths":
        parts = ["src", "a", "..", ".", "lib", "x_y", "v1.2", "*", "__init__.py", "test.ts", "-", "+", "~"]
        out: list[str] = []
        size = 0
        while size < chars:
            piece = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 6))) + rng.choice(["", ".", "/", " "])
            out.append(piece)
            size += len(piece)
        return "".join(out)[:chars]
    if kind == "words":
        text = " ".join(p for _, p in prompts(max(1, chars // 40))) + " see src/auth/login.py "
        return (text * (chars // len(text) + 1))[:chars]
    raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")


@dataclass
class Probes:
    """(started, seconds) of each probe that answered, and how many did not."""

    gateway: list[tuple[float, float]] = field(default_factory=list)
    metrics: list[tuple[float, float]] = field(default_factory=list)
    failed: int = 0


async def _get(port: int, path: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readline()
        if b" 200 " not in head:
            raise ConnectionError(f"{path} answered {head!r}")
        await reader.read()
    finally:
        writer.close()


async def _probe(gateway_port: int, metrics_port: int, probes: Probes, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for port, path, into in (
            (gateway_port, "/healthz", probes.gateway),
            (metrics_port, "/metrics", probes.metrics),
        ):
            started = time.perf_counter()
            try:
                await asyncio.wait_for(_get(port, path), PROBE_TIMEOUT_S)
            except (OSError, TimeoutError):
                probes.failed += 1
                continue
            into.append((started, time.perf_counter() - started))
        await asyncio.sleep(PROBE_EVERY_S)


async def _warm_up(publisher: EventPublisher, topics: Topics, seen: Observed) -> None:
    """Until one request makes the whole round trip (consumer groups joined)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        warm = _request(-1, "auth", "warm up the pipeline")
        await publisher.publish(topics.retrieval_requested, warm)
        t0 = time.monotonic()
        while str(warm.correlation_id) not in seen.injected and time.monotonic() - t0 < 2.0:
            await asyncio.sleep(0.01)
        if str(warm.correlation_id) in seen.injected:
            return


@dataclass(frozen=True, slots=True)
class Plan:
    rate: float
    duration_s: float
    large: str
    every_s: float


async def _drive(
    config: KafkaClientConfig, topics: Topics, plan: Plan, ports: tuple[int, int]
) -> tuple[Observed, set[str], Probes]:
    seen, probes = Observed(), Probes()
    ready, stop = asyncio.Event(), asyncio.Event()
    reader = asyncio.create_task(_receive(config, topics, lambda: seen, ready, stop))
    await asyncio.wait_for(ready.wait(), STARTUP_TIMEOUT_S)
    large_ids: set[str] = set()
    async with EventPublisher(config, "bench-adversarial") as publisher:
        await _warm_up(publisher, topics, seen)
        warm_ids = set(seen.injected)
        prober = asyncio.create_task(_probe(*ports, probes, stop))
        normal = prompts(int(plan.rate * plan.duration_s))
        sends = []
        start = time.perf_counter()
        next_large = start + plan.every_s / 2 if plan.every_s > 0 else float("inf")  # 0: a baseline, none
        for i, (domain, prompt) in enumerate(normal):
            at = start + i / plan.rate
            while next_large <= at:  # a large prompt is due before this normal one
                await _sleep_until(next_large)
                sends.append(_send(publisher, topics, seen, _request(-2 - len(large_ids), "auth", plan.large)))
                large_ids.add(str(sends[-1][0]))
                next_large += plan.every_s
            await _sleep_until(at)
            sends.append(_send(publisher, topics, seen, _request(i, domain, prompt)))
        await asyncio.gather(*(task for _, task in sends))
        deadline = time.perf_counter() + DRAIN_S + 10.0
        while time.perf_counter() < deadline and not set(seen.sent_at) <= set(seen.injected):
            await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(reader, prober)
    for cid in warm_ids:
        seen.injected.pop(cid, None)
    return seen, large_ids, probes


async def _sleep_until(at: float) -> None:
    delay = at - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


def _send(publisher: EventPublisher, topics: Topics, seen: Observed, event: Any) -> tuple[Any, asyncio.Task[None]]:
    cid = str(event.correlation_id)
    seen.sent_at[cid] = time.perf_counter()
    seen.request_emitted[cid] = event.emitted_at.timestamp()
    return event.correlation_id, asyncio.create_task(publisher.publish(topics.retrieval_requested, event))


def _during(at: float, windows: Sequence[tuple[float, float]]) -> bool:
    return any(start <= at <= end for start, end in windows)


def report(seen: Observed, large_ids: set[str], probes: Probes) -> dict[str, Any]:
    def e2e(cid: str) -> float:
        return (seen.injected[cid][0] - seen.sent_at[cid]) * 1000.0

    answered = [c for c in seen.sent_at if c in seen.injected]
    large = [c for c in answered if c in large_ids]
    windows = [(seen.sent_at[c], seen.injected[c][0]) for c in large]
    normal = [c for c in answered if c not in large_ids]
    during = [e2e(c) for c in normal if _during(seen.sent_at[c], windows)]
    otherwise = [e2e(c) for c in normal if not _during(seen.sent_at[c], windows)]

    def probe_figures(samples: list[tuple[float, float]]) -> dict[str, Any]:
        inside = [s * 1000.0 for at, s in samples if _during(at, windows)]
        return {
            "all_ms": summary([s * 1000.0 for _, s in samples]),
            "during_large_ms": summary(inside),
            "count": len(samples),
            "during_large": len(inside),
        }

    normal_sent = [c for c in seen.sent_at if c not in large_ids]
    return {
        "large": {
            "sent": len(large_ids),
            "answered": len(large),
            "end_to_end_ms": [round(e2e(c), 1) for c in large],
            "retrieval_work_ms": [float(seen.injected[c][2].retrieval_duration_ms) for c in large],
            "empty_reasons": sorted({seen.injected[c][2].empty_reason or "" for c in large}),
        },
        "normal": {
            "sent": len(normal_sent),
            "answered": len(normal),
            "lost": len(normal_sent) - len(normal),
            "end_to_end_ms": summary([e2e(c) for c in normal]),
            "during_large_ms": summary(during),
            "otherwise_ms": summary(otherwise),
            "during_large": len(during),
        },
        "probes": {"gateway": probe_figures(probes.gateway), "metrics": probe_figures(probes.metrics)},
        "probes_failed": probes.failed,
    }


def run(memories_count: int, rate: float, duration_s: float, chars: int, kind: str, every_s: float) -> dict[str, Any]:
    if not 1 <= chars <= MAX_PROMPT_CHARS:
        raise ValueError(f"the large prompt must have 1 to {MAX_PROMPT_CHARS} characters, not {chars}")
    plan = Plan(rate, duration_s, large_prompt(kind, chars), every_s)
    load_before = os.getloadavg()
    with bench_stack(memories_count) as stack:
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        ports = (int(runtime["gateway_port"]), int(runtime["metrics_port"]))
        seen, large_ids, probes = asyncio.run(_drive(stack.kafka, Topics(stack.settings.topic_prefix), plan, ports))
    result = report(seen, large_ids, probes)
    result.update(
        {
            "memories": memories_count,
            "rate_per_s": rate,
            "duration_s": duration_s,
            "large_chars": chars,
            "large_kind": kind,
            "large_every_s": every_s,
            "load_average": {"before": [round(x, 2) for x in load_before], "after": list(os.getloadavg())},
            "cores": os.cpu_count(),
        }
    )
    return result


def _line(label: str, s: dict[str, float]) -> str:
    return f"  {label:44s} p50 {s['p50']:8.1f}  p99 {s['p99']:8.1f}  max {s['max']:8.1f} ms"


def print_report(result: dict[str, Any]) -> None:
    load = result["load_average"]
    large_ones = (
        f"a {result['large_chars']:,}-character {result['large_kind']} prompt every {result['large_every_s']:g} s"
        if result["large_every_s"] > 0
        else "no large prompt (a baseline)"
    )
    print(
        f"ctxbus bench adversarial: {result['memories']} memories, {result['rate_per_s']:g} req/s for "
        f"{result['duration_s']:g} s, {large_ones} (load average {load['before'][0]:.1f} before, "
        f"{load['after'][0]:.1f} after, {result['cores']} cores)"
    )
    large, normal = result["large"], result["normal"]
    latencies = large["end_to_end_ms"]
    print(
        f"  large prompts: sent {large['sent']}, answered {large['answered']}, end to end "
        f"p50 {summary(latencies)['p50']:.1f} max {summary(latencies)['max']:.1f} ms "
        f"(retrieval work max {max(large['retrieval_work_ms'], default=float('nan')):.1f} ms)"
    )
    print(f"  normal requests: sent {normal['sent']}, answered {normal['answered']}, lost {normal['lost']}")
    print(_line("normal, all", normal["end_to_end_ms"]))
    print(_line(f"normal, while a large one ran ({normal['during_large']})", normal["during_large_ms"]))
    print(_line("normal, otherwise", normal["otherwise_ms"]))
    for name, label in (("gateway", "gateway /healthz"), ("metrics", "/metrics")):
        probe = result["probes"][name]
        print(_line(f"{label}, all ({probe['count']})", probe["all_ms"]))
        print(_line(f"{label}, while a large one ran ({probe['during_large']})", probe["during_large_ms"]))
    print(f"  probes that failed: {result['probes_failed']}")
