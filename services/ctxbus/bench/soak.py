"""``ctxbus bench pipeline --soak N``: one stack held at one rate for N windows, each reported on its own.

A capacity step lasts seconds on a fresh broker. What a stack costs after it has answered thousands of requests is
another figure: the embedded broker (Tansu 0.6, memory storage) lists every batch a partition holds on each fetch
that returns records (``ctxbus bench broker``), so its CPU per request grows with the requests answered since it
started, until ``ctxbus up`` restarts it (the archive refills it in large batches). The soak shows that drift: the
same rate, window after window, with each window's latency and CPU per request of every process.

:func:`drift` (pure, unit-tested) compares the first and the last windows; :func:`soak` runs the windows.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from ctxbus.bench.capacity import SETTLE_S, STEP_DRAIN_S, print_step, step_figures
from ctxbus.bench.pipeline import IDLE_S, Driver, stack_pids
from ctxbus.bench.stack import bench_stack
from ctxbus.contract.topics import Topics

#: windows averaged at each end when the first and the last are compared
ENDS = 2


def drift(windows: Sequence[dict[str, Any]], ends: int = ENDS) -> dict[str, Any]:
    """The first ``ends`` windows against the last ``ends``: mean end-to-end p50 and p99, and mean CPU ms per
    request of every process, with the ratio last / first. Needs at least two windows (``ends`` shrinks to fit)."""
    if len(windows) < 2:
        raise ValueError(f"drift needs at least two windows, got {len(windows)}")
    n = max(1, min(ends, len(windows) // 2))
    first, last = windows[:n], windows[-n:]

    def mean(rows: Sequence[dict[str, Any]], pick: Any) -> float:
        values = [v for v in (pick(r) for r in rows) if v is not None and not math.isnan(v)]
        return statistics.fmean(values) if values else math.nan

    def compare(pick: Any) -> dict[str, float]:
        a, b = mean(first, pick), mean(last, pick)
        ratio = b / a if a and not math.isnan(a) and not math.isnan(b) else math.nan
        return {"first": round(a, 2), "last": round(b, 2), "ratio": round(ratio, 2)}

    processes = sorted({k for w in windows for k in w.get("cpu_ms_per_request", {}) if not k.startswith("stack ")})
    return {
        "windows_compared": n,
        "end_to_end_p50_ms": compare(lambda w: w["end_to_end_ms"].get("p50")),
        "end_to_end_p99_ms": compare(lambda w: w["end_to_end_ms"].get("p99")),
        "cpu_ms_per_request": {p: compare(lambda w, p=p: w.get("cpu_ms_per_request", {}).get(p)) for p in processes},
    }


async def _windows(driver: Driver, rate: float, windows: int, window_s: float, distinct: bool) -> list[dict[str, Any]]:
    idle = await driver.idle(IDLE_S)
    rows: list[dict[str, Any]] = []
    answered = 0
    for i in range(windows):
        step = await driver.step(rate, window_s, distinct=distinct, drain_s=STEP_DRAIN_S)
        figures = step_figures(step, rate, idle)
        answered += figures["answered"]
        figures.update({"window": i + 1, "answered_so_far": answered})
        rows.append(figures)
        print_step(figures, label=f"window {i + 1} ({answered} so far)", file=sys.stderr)
        if not await driver.settle(SETTLE_S):
            break
    return rows


def soak(
    memories_count: int, rate: float, windows: int, *, window_s: float = 10.0, distinct: bool = False
) -> dict[str, Any]:
    """``windows`` windows of ``window_s`` seconds at ``rate`` on one fresh stack (see the module doc)."""
    if windows < 2:
        raise ValueError(f"a soak needs at least two windows, got {windows}")
    with bench_stack(memories_count) as stack:

        async def go() -> list[dict[str, Any]]:
            async with Driver(stack.kafka, Topics(stack.settings.topic_prefix), stack_pids(stack.proc.pid)) as d:
                return await _windows(d, rate, windows, window_s, distinct)

        rows = asyncio.run(go())
    return {
        "memories": memories_count,
        "rate_per_s": rate,
        "window_s": window_s,
        "distinct_prompts": distinct,
        "windows": rows,
        "lost": sum(r["lost"] for r in rows),
        "drift": drift(rows) if len(rows) >= 2 else None,
    }


def print_soak(result: dict[str, Any]) -> None:
    rows = result["windows"]
    print(
        f"ctxbus bench pipeline --soak: {result['memories']} memories, {result['rate_per_s']:g} req/s, "
        f"{len(rows)} windows of {result['window_s']:g} s, unanswered within {STEP_DRAIN_S:g} s of a window's end: "
        f"{result['lost']}"
    )
    for r in rows:
        e2e, cpu = r["end_to_end_ms"], r.get("cpu_ms_per_request", {})
        parts = ", ".join(f"{k} {v:.1f}" for k, v in cpu.items() if not k.startswith("stack "))
        print(
            f"  window {r['window']:3d} ({r['answered_so_far']:6d} answered so far): p50 {e2e['p50']:7.1f} "
            f"p99 {e2e['p99']:7.1f} ms; CPU ms/request {parts}"
        )
    d = result["drift"]
    if d is None:
        return
    cpu = d["cpu_ms_per_request"]
    line = ", ".join(f"{k} {v['first']:g} -> {v['last']:g} (x{v['ratio']:g})" for k, v in cpu.items())
    p50, p99 = d["end_to_end_p50_ms"], d["end_to_end_p99_ms"]
    print(
        f"  first {d['windows_compared']} windows -> last {d['windows_compared']}: p50 {p50['first']:g} -> "
        f"{p50['last']:g} ms, p99 {p99['first']:g} -> {p99['last']:g} ms; CPU ms/request {line}"
    )
