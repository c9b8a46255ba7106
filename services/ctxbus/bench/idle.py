"""``ctxbus bench idle``: what an idle stack costs, and how fast its first request after a silence is.

Loads N memories, starts ``ctxbus up`` (broker, gateway and retriever, the child with the injector and the recorder),
and, through the gateway's ``/v1/hooks`` (an ``http`` hook's round trip: the benchmark has no Kafka client that
could poll the broker itself):

1. the warm end-to-end time: ``warm`` requests one after another, a moment apart (their p50 is the reference);
2. each process's share of a core over ``idle_s`` of silence, from its own CPU time in ``/proc`` (user + system:
   what other load on the machine hardly inflates, unlike wall-clock time);
3. after each of ``pauses`` seconds of silence, one request's end-to-end time, against the warm p50 (and the share
   of a core each process took during that pause).

Every prompt is new (a prompt asked again finds its query vector remembered).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ctxbus.bench.corpus import prompts
from ctxbus.bench.cpu import CpuMeter, core_share
from ctxbus.bench.hooks import _context_of, _project_dir, hook_input, http_hook_call
from ctxbus.bench.pipeline import stack_pids
from ctxbus.bench.stack import PROJECT, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.hooks.wire import read_secret

WARMUP_CALLS = 5
#: between two warm requests (a user's prompts are seconds apart; the stack is not loaded, only warm)
WARM_GAP_S = 0.25
DEFAULT_PAUSES = (10.0, 60.0, 300.0)


class _Gateway:
    """Requests through the stack's gateway, each with a new prompt."""

    def __init__(self, port: int, secret: str, cwd: Any, count: int) -> None:
        self._port, self._secret, self._cwd = port, secret, cwd
        self._prompts = [f"{p} (case {n})" for n, (_, p) in enumerate(prompts(count))]
        self._next = 0

    def call(self) -> tuple[float, bool]:
        """One request: its end-to-end milliseconds and whether its answer carried context."""
        i = self._next
        self._next += 1
        body = hook_input(i, self._prompts[i % len(self._prompts)], self._cwd)
        started = time.perf_counter()
        try:
            answer: bytes | None = http_hook_call(self._port, self._secret, body)
        except (OSError, ValueError):
            answer = None
        ms = (time.perf_counter() - started) * 1000
        return ms, bool(_context_of(answer)) if answer is not None else False


def _stack_only(pids: dict[str, int]) -> dict[str, int]:
    """The stack's processes (the benchmark's own, which only waits, left out)."""
    return {name: pid for name, pid in pids.items() if name != "client"}


def _share(meter: CpuMeter) -> dict[str, float]:
    share = core_share(meter.used_s, meter.elapsed_s)
    share["total"] = round(sum(share.values()), 1)
    return share


def run(
    memories_count: int,
    *,
    warm: int = 20,
    idle_s: float = 60.0,
    pauses: tuple[float, ...] = DEFAULT_PAUSES,
    say: Callable[[str], None] = lambda _m: None,
    **env: str,
) -> dict[str, Any]:
    with bench_stack(memories_count, CTXBUS_PROJECT=PROJECT, **env) as stack:
        pids = _stack_only(stack_pids(stack.proc.pid))
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        port, secret = int(runtime["gateway_port"]), read_secret({}, str(stack.settings.data_dir)) or ""
        gateway = _Gateway(port, secret, _project_dir(stack.settings.data_dir), WARMUP_CALLS + warm + len(pauses))
        say(f"stack up ({', '.join(f'{n} {p}' for n, p in pids.items())}); warming up")
        for _ in range(WARMUP_CALLS):
            gateway.call()
            time.sleep(WARM_GAP_S)
        warm_ms: list[float] = []
        answered = 0
        for _ in range(warm):
            ms, context = gateway.call()
            warm_ms.append(ms)
            answered += context
            time.sleep(WARM_GAP_S)
        warm_p50 = summary(warm_ms)["p50"]
        say(f"warm p50 {warm_p50:.1f} ms; measuring {idle_s:g} s idle")
        meter = CpuMeter(pids)
        meter.start()
        time.sleep(idle_s)
        meter.stop()
        after: list[dict[str, Any]] = []
        for pause in pauses:
            say(f"{pause:g} s of silence, then one request")
            during = CpuMeter(pids)
            during.start()
            time.sleep(pause)
            during.stop()
            ms, context = gateway.call()
            after.append(
                {
                    "pause_s": pause,
                    "end_to_end_ms": round(ms, 2),
                    "vs_warm_p50": round(ms / warm_p50, 2) if warm_p50 else None,
                    "with_context": context,
                    "cpu_core_percent": _share(during),
                }
            )
            time.sleep(WARM_GAP_S)
    return {
        "memories": memories_count,
        "processes": pids,
        "warm": {"requests": warm, "with_context": answered, "end_to_end_ms": summary(warm_ms)},
        "idle_s": round(meter.elapsed_s, 1),
        "cpu_core_percent_idle": _share(meter),
        "cpu_s_idle": {name: round(s, 3) for name, s in meter.used_s.items()},
        "after_silence": after,
        "doorbell": env.get("CTXBUS_KAFKA_DOORBELL", "default"),
    }


def print_report(result: dict[str, Any]) -> None:
    w = result["warm"]["end_to_end_ms"]
    print(
        f"ctxbus bench idle: {result['memories']} memories, doorbell {result['doorbell']}; processes "
        + ", ".join(f"{n} (pid {p})" for n, p in result["processes"].items())
    )
    print(
        f"  warm end to end (gateway /v1/hooks, {result['warm']['requests']} requests, "
        f"{result['warm']['with_context']} with context): p50 {w['p50']:.1f}  p95 {w['p95']:.1f}  max {w['max']:.1f} ms"
    )
    share = result["cpu_core_percent_idle"]
    print(
        f"  % of a core idle over {result['idle_s']:g} s: "
        + ", ".join(f"{n} {v:.1f}" for n, v in share.items() if n != "total")
        + f"; whole stack {share['total']:.1f}"
    )
    for row in result["after_silence"]:
        print(
            f"  first request after {row['pause_s']:6g} s of silence: {row['end_to_end_ms']:7.1f} ms "
            f"({row['vs_warm_p50']}x the warm p50; context {'yes' if row['with_context'] else 'no'}; "
            f"stack {row['cpu_core_percent']['total']:.1f}% of a core during the pause)"
        )
