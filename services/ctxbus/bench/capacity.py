"""``ctxbus bench pipeline --find-capacity``: the highest request rate the stack sustains.

One stack (``ctxbus up`` over N memories) and one benchmark client for the whole sweep. Each step sends requests
open-loop at a rate for a while; a step passes when every request is answered, the end-to-end p99 is within the
limit (250 ms) and the answers kept up with the rate. The rate grows by a factor while steps pass, then the
search bisects between the highest pass and the lowest failure until they are within the precision. Between
steps the client waits for the stack's backlog to clear. Then it measures the latency at 20/s and at 50% and 90%
of the capacity found.

:class:`CapacitySearch` is the stepping, pure (unit-tested); :func:`find_capacity` runs it on a stack.
"""

from __future__ import annotations

import asyncio
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxbus.bench.cpu import CpuMeter, core_share
from ctxbus.bench.pipeline import IDLE_S, Driver, Step, cpu_report, report, stack_pids
from ctxbus.bench.stack import bench_stack
from ctxbus.contract.topics import Topics

P99_LIMIT_MS = 250.0
#: a step keeps up when its answers came at least this share of the rate (what was sent over the time to the last)
KEEP_UP = 0.95
#: how long the client waits for a failed step's backlog to clear before the next step
SETTLE_S = 120.0
#: how long a step's last answers are waited for once sending stops (a step that needs longer fails anyway)
STEP_DRAIN_S = 5.0


@dataclass(frozen=True, slots=True)
class StepOutcome:
    rate: float
    p50_ms: float
    p99_ms: float
    unanswered: int
    throughput_per_s: float

    def passes(self, p99_limit_ms: float = P99_LIMIT_MS) -> bool:
        """Nothing unanswered, the p99 within the limit, and the answers kept up with the rate."""
        return (
            self.unanswered == 0
            and not math.isnan(self.p99_ms)
            and self.p99_ms <= p99_limit_ms
            and self.throughput_per_s >= KEEP_UP * self.rate
        )


@dataclass
class CapacitySearch:
    """Which rate to try next: ``start``, then ``growth`` times the last while steps pass, then halfway between
    the highest pass and the lowest failure until they are within ``precision`` (a share of the pass) apart. Below
    a first failure it halves the rate. Done (``next_rate`` is None) after ``max_steps``, above ``max_rate``, or
    when nothing down to ``min_rate`` passes."""

    start: float = 20.0
    growth: float = 1.5
    precision: float = 0.1
    max_rate: float = 5_000.0
    min_rate: float = 1.0
    max_steps: int = 16
    p99_limit_ms: float = P99_LIMIT_MS
    outcomes: list[StepOutcome] = field(default_factory=list)

    @property
    def best(self) -> float | None:
        """The highest rate that passed (None: none did)."""
        passed = [o.rate for o in self.outcomes if o.passes(self.p99_limit_ms)]
        return max(passed) if passed else None

    @property
    def lowest_failure(self) -> float | None:
        failed = [o.rate for o in self.outcomes if not o.passes(self.p99_limit_ms)]
        return min(failed) if failed else None

    def record(self, outcome: StepOutcome) -> None:
        self.outcomes.append(outcome)

    def next_rate(self) -> float | None:
        if len(self.outcomes) >= self.max_steps:
            return None
        if not self.outcomes:
            return self.start
        best, failure = self.best, self.lowest_failure
        if failure is None:  # growing
            assert best is not None
            grown = float(round(best * self.growth))
            return grown if grown <= self.max_rate else None
        if best is None:  # nothing passed yet: lower
            rate = round(failure / 2, 1)
            return rate if rate >= self.min_rate else None
        if failure - best <= self.precision * best:
            return None
        middle = float(round((best + failure) / 2))
        return middle if best < middle < failure else None


def outcome_of(figures: dict[str, Any]) -> StepOutcome:
    e2e = figures["end_to_end_ms"]
    return StepOutcome(
        rate=float(figures["rate_per_s"]),
        p50_ms=float(e2e["p50"]),
        p99_ms=float(e2e["p99"]),
        unanswered=int(figures["lost"]),
        throughput_per_s=float(figures["throughput_per_s"]),
    )


def step_figures(step: Step, rate: float, idle: CpuMeter | None) -> dict[str, Any]:
    """One load step's latency, throughput and CPU figures at ``rate`` (``idle``: the stack's idle meter)."""
    figures = report(step.seen, step.total, step.duration_s, step.started)
    figures["rate_per_s"] = rate
    figures.update(cpu_report(step.seen, idle, step.busy))
    return figures


async def _sweep(driver: Driver, search: CapacitySearch, step_s: float, distinct: bool) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    idle = await driver.idle(IDLE_S)
    settled = True
    while settled and (rate := search.next_rate()) is not None:
        figures = step_figures(await driver.step(rate, step_s, distinct=distinct, drain_s=STEP_DRAIN_S), rate, idle)
        outcome = outcome_of(figures)
        search.record(outcome)
        steps.append({**figures, "passed": outcome.passes(search.p99_limit_ms)})
        print_step(steps[-1], file=sys.stderr)
        settled = await driver.settle(SETTLE_S)
    capacity = search.best
    latency: dict[str, dict[str, Any]] = {}
    if settled:
        marks = {"20/s": 20.0}
        if capacity is not None:
            marks.update({"50% of capacity": round(capacity * 0.5, 1), "90% of capacity": round(capacity * 0.9, 1)})
        for label, rate in marks.items():
            figures = step_figures(await driver.step(rate, step_s, distinct=distinct, drain_s=STEP_DRAIN_S), rate, idle)
            latency[label] = figures
            print_step(figures, label=label, file=sys.stderr)
            await driver.settle(SETTLE_S)
    return {
        "capacity_per_s": capacity,
        "lowest_failing_rate_per_s": search.lowest_failure,
        "steps": steps,
        "latency": latency,
        "settled": settled,
        "outcomes": [asdict(o) for o in search.outcomes],
        "cpu_core_percent_idle": core_share(idle.used_s, idle.elapsed_s),
    }


def find_capacity(
    memories_count: int, *, step_s: float = 10.0, start: float = 20.0, distinct: bool = False
) -> dict[str, Any]:
    search = CapacitySearch(start=start)
    with bench_stack(memories_count) as stack:

        async def go() -> dict[str, Any]:
            async with Driver(stack.kafka, Topics(stack.settings.topic_prefix), stack_pids(stack.proc.pid)) as d:
                return await _sweep(d, search, step_s, distinct)

        result = asyncio.run(go())
    result.update(
        {
            "memories": memories_count,
            "step_s": step_s,
            "p99_limit_ms": search.p99_limit_ms,
            "distinct_prompts": distinct,
        }
    )
    return result


def print_step(figures: dict[str, Any], label: str | None = None, file: Any = None) -> None:
    """One step's line (the sweep's progress goes to stderr, so ``--json`` keeps stdout JSON)."""
    e2e, cpu = figures["end_to_end_ms"], figures.get("cpu_ms_per_request", {})
    beyond = figures.get("cpu_ms_per_request_beyond_idle", {})
    verdict = label or ("pass" if figures.get("passed") else "FAIL")
    print(
        f"  {figures['rate_per_s']:7.1f}/s  {verdict:16s} answered {figures['answered']}/{figures['sent']}, "
        f"{figures['throughput_per_s']:6.1f}/s, end to end p50 {e2e['p50']:7.1f} p99 {e2e['p99']:7.1f} ms, "
        f"CPU {cpu.get('total', math.nan):5.2f} ms/request ({beyond.get('total', math.nan):5.2f} beyond idle; "
        f"load average {figures.get('loadavg_1min')})",
        file=file,
        flush=True,
    )


def print_capacity(result: dict[str, Any]) -> None:
    capacity = result["capacity_per_s"]
    kind = "distinct prompts" if result["distinct_prompts"] else "the corpus's prompts (they repeat)"
    print(
        f"ctxbus bench pipeline --find-capacity: {result['memories']} memories, {kind}, steps of "
        f"{result['step_s']:g} s, p99 limit {result['p99_limit_ms']:g} ms"
    )
    if capacity is None:
        print("  no rate passed")
    else:
        failure = result["lowest_failing_rate_per_s"]
        above = f" ({failure:g}/s failed)" if failure is not None else " (the highest rate tried)"
        print(f"  highest sustained rate: {capacity:g}/s{above}")
    best = [s for s in result["steps"] if s["passed"] and s["rate_per_s"] == capacity]
    if best:
        cpu, beyond = best[0]["cpu_ms_per_request"], best[0].get("cpu_ms_per_request_beyond_idle", {})
        print(
            "  CPU ms/request there: "
            + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items() if not k.startswith("stack "))
            + " (beyond idle: "
            + ", ".join(f"{k} {v:.2f}" for k, v in beyond.items())
            + f"); idle: {result['cpu_core_percent_idle']}% of a core"
        )
    if not result["settled"]:
        print("  the stack did not clear its backlog after a step: stopped")
    for label, figures in result["latency"].items():
        e2e = figures["end_to_end_ms"]
        print(
            f"  at {label:16s} ({figures['rate_per_s']:g}/s): end to end p50 {e2e['p50']:.1f} ms, "
            f"p99 {e2e['p99']:.1f} ms, lost {figures['lost']}"
        )
