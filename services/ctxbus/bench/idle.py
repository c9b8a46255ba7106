"""``ctxbus bench idle``: what an idle stack costs, and how fast its first request after a silence is.

Loads N memories, starts ``ctxbus up`` (broker, gateway and retriever, the child with the injector and the recorder),
and, through the gateway's ``/v1/hooks`` (an ``http`` hook's round trip: the benchmark has no Kafka client that
could poll the broker itself):

1. the warm end-to-end time: ``warm`` requests one after another, a moment apart (their p50 is the reference);
2. each process's share of a core over ``idle_s`` of silence, from its own CPU time in ``/proc`` (user + system:
   what other load on the machine hardly inflates, unlike wall-clock time);
3. after each of ``pauses`` seconds of silence (repeats allowed: ``300,300,300``), one request's end-to-end time,
   against the warm p50 (and the share of a core each process took during that pause); beside it, measured after
   the same silence just before the request, the machine's own after-silence penalty with no bus (the controls of
   ``ctxbus.bench.idle_probe``: an embed and a loopback round trip in this process, against their warm p50s), the
   stack's major page faults during the request, and where the request's time went, hop by hop (from its records'
   timestamps, read at the end).

With ``ping_every_s``, each silence is broken by a request every that many seconds, the last one that long before
the timed request (:func:`ping_offsets`): the stack kept warm from outside, through its whole path, to show what that
costs (the stack's share of a core during the pause) and what it buys (the timed request against the warm p50).

Every prompt is new (a prompt asked again finds its query vector remembered).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from ctxbus.bench.corpus import prompts
from ctxbus.bench.cpu import CpuMeter, core_share
from ctxbus.bench.hook_load import scrape
from ctxbus.bench.hooks import _context_of, _project_dir, hook_input, http_hook_call
from ctxbus.bench.idle_probe import (
    Call,
    Controls,
    Scraped,
    chains_of,
    fault_delta,
    hops,
    major_faults,
    pause_row,
    stage_delta,
)
from ctxbus.bench.pipeline import stack_pids
from ctxbus.bench.stack import PROJECT, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.components import open_embedder
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret

WARMUP_CALLS = 5
#: between two warm requests (a user's prompts are seconds apart; the stack is not loaded, only warm)
WARM_GAP_S = 0.25
DEFAULT_PAUSES = (10.0, 60.0, 300.0)


class _Gateway:
    """Requests through the stack's gateway, each with a new prompt."""

    def __init__(self, port: int, secret: str, cwd: Any, count: int, metrics_port: int | None = None) -> None:
        """``metrics_port``: the stack's ``/metrics`` (``up``'s, its child's series with it), read after each
        request for its stages' times (None: not read)."""
        self._port, self._secret, self._cwd = port, secret, cwd
        self._metrics_port = metrics_port
        self._scraped: Scraped = {}
        #: each request's stage times (``ctxbus.bench.idle_probe.stage_delta``), by case number
        self.stages: dict[int, dict[str, float]] = {}
        self._prompts = [f"{p} (case {n})" for n, (_, p) in enumerate(prompts(count))]
        self._next = 0
        #: every request made, in order (its case number is the prompt's ``(case N)``)
        self.calls: list[Call] = []

    def call(self) -> tuple[float, bool]:
        """One request: its end-to-end milliseconds and whether its answer carried context."""
        i = self._next
        self._next += 1
        body = hook_input(i, self._prompts[i % len(self._prompts)], self._cwd)
        sent_at = time.time()
        started = time.perf_counter()
        try:
            answer: bytes | None = http_hook_call(self._port, self._secret, body)
        except (OSError, ValueError):
            answer = None
        ms = (time.perf_counter() - started) * 1000
        self.calls.append(Call(i % len(self._prompts), sent_at, sent_at + ms / 1000))
        self._read_stages(i % len(self._prompts))
        return ms, bool(_context_of(answer)) if answer is not None else False

    def _read_stages(self, case: int) -> None:
        if self._metrics_port is None:
            return
        try:
            scraped = scrape(self._metrics_port)
        except (OSError, ValueError):  # a request's stages unknown: the next one reads from here
            self._scraped = {}
            return
        if self._scraped:
            self.stages[case] = stage_delta(self._scraped, scraped)
        self._scraped = scraped


def ping_offsets(pause_s: float, every_s: float) -> list[float]:
    """When, in seconds into a ``pause_s`` silence, a keep-warm request is sent when one goes every ``every_s`` (0:
    never): counted back from the timed request at the pause's end, so the last one is ``every_s`` before it."""
    if every_s <= 0:
        return []
    count = math.ceil(pause_s / every_s) - 1
    return [round(pause_s - k * every_s, 6) for k in range(count, 0, -1)]


def _silence(pause_s: float, every_s: float, call: Callable[[], tuple[float, bool]]) -> list[float]:
    """Wait ``pause_s``, with a request at each of :func:`ping_offsets`; their end-to-end milliseconds."""
    started = time.monotonic()
    pinged: list[float] = []
    for offset in ping_offsets(pause_s, every_s):
        time.sleep(max(0.0, started + offset - time.monotonic()))
        pinged.append(call()[0])
    time.sleep(max(0.0, started + pause_s - time.monotonic()))
    return pinged


def _stack_only(pids: dict[str, int]) -> dict[str, int]:
    """The stack's processes (the benchmark's own, which only waits, left out)."""
    return {name: pid for name, pid in pids.items() if name != "client"}


def _share(meter: CpuMeter) -> dict[str, float]:
    share = core_share(meter.used_s, meter.elapsed_s)
    share["total"] = round(sum(share.values()), 1)
    return share


def _first_after(
    pause: float,
    ping_every_s: float,
    gateway: _Gateway,
    controls: Controls,
    pids: dict[str, int],
    warm_p50: float,
    control_p50: dict[str, float],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """One silence (kept warm by a request every ``ping_every_s``, when above 0), then the timed request: its row."""
    kept = f" (a request every {ping_every_s:g} s)" if ping_every_s > 0 else ""
    say(f"{pause:g} s of silence{kept}, then one request")
    during = CpuMeter(pids)
    during.start()
    pinged = _silence(pause, ping_every_s, gateway.call)
    during.stop()
    control = controls.measure()  # the machine after the same silence: the stack is not woken by it
    faults = major_faults(pids)
    ms, context = gateway.call()
    row = pause_row(pause, ms, warm_p50, control, control_p50)
    row |= {
        "with_context": context,
        "cpu_core_percent": _share(during),
        "major_faults": fault_delta(faults, major_faults(pids)),
        "case": gateway.calls[-1].case,
    }
    if ping_every_s > 0:
        row["pings"] = {"every_s": ping_every_s, "count": len(pinged), "end_to_end_ms": summary(pinged)}
    time.sleep(WARM_GAP_S)
    return row


def run(
    memories_count: int,
    *,
    warm: int = 20,
    idle_s: float = 60.0,
    pauses: tuple[float, ...] = DEFAULT_PAUSES,
    ping_every_s: float = 0.0,
    say: Callable[[str], None] = lambda _m: None,
    **env: str,
) -> dict[str, Any]:
    with bench_stack(memories_count, CTXBUS_PROJECT=PROJECT, **env) as stack:
        pids = _stack_only(stack_pids(stack.proc.pid))
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        port, secret = int(runtime["gateway_port"]), read_secret({}, str(stack.settings.data_dir)) or ""
        pings = sum(len(ping_offsets(p, ping_every_s)) for p in pauses)
        calls = WARMUP_CALLS + warm + len(pauses) + pings
        metrics_port = int(runtime["metrics_port"]) or None
        gateway = _Gateway(port, secret, _project_dir(stack.settings.data_dir), calls, metrics_port)
        controls = Controls(open_embedder(stack.settings))  # its own embedder: the embed control
        say(f"stack up ({', '.join(f'{n} {p}' for n, p in pids.items())}); warming up")
        try:
            for _ in range(WARMUP_CALLS):
                gateway.call()
                controls.measure()
                time.sleep(WARM_GAP_S)
            warm_ms: list[float] = []
            control_warm: dict[str, list[float]] = {}
            answered = 0
            for _ in range(warm):
                for name, ms in controls.measure().items():
                    control_warm.setdefault(name, []).append(ms)
                ms, context = gateway.call()
                warm_ms.append(ms)
                answered += context
                time.sleep(WARM_GAP_S)
            warm_p50 = summary(warm_ms)["p50"]
            control_p50 = {name: summary(values)["p50"] for name, values in control_warm.items()}
            say(f"warm p50 {warm_p50:.1f} ms; measuring {idle_s:g} s idle")
            meter = CpuMeter(pids)
            meter.start()
            time.sleep(idle_s)
            meter.stop()
            after = [
                _first_after(pause, ping_every_s, gateway, controls, pids, warm_p50, control_p50, say)
                for pause in pauses
            ]
        finally:
            controls.close()
        topics = Topics(stack.settings.topic_prefix)
        chains = chains_of(stack.kafka, topics.retrieval_requested, topics.retrieval_completed, topics.context_injected)
    warm_calls = gateway.calls[WARMUP_CALLS : WARMUP_CALLS + warm]
    warm_hops = [h for h in (hops(c, chains) for c in warm_calls) if h is not None]
    by_case = {c.case: c for c in gateway.calls}
    warm_stages = [gateway.stages[c.case] for c in warm_calls if c.case in gateway.stages]
    for row in after:
        row["hops_ms"] = hops(by_case[row["case"]], chains)
        row["stages_ms"] = gateway.stages.get(row["case"], {})
    return {
        "memories": memories_count,
        "processes": pids,
        "warm": {
            "requests": warm,
            "with_context": answered,
            "end_to_end_ms": summary(warm_ms),
            "control_p50_ms": control_p50,
            "hops_p50_ms": {
                name: summary([h[name] for h in warm_hops if name in h])["p50"] for name in (warm_hops or [{}])[0]
            },
            "stages_p50_ms": {
                name: summary([s[name] for s in warm_stages if name in s])["p50"]
                for name in sorted({n for s in warm_stages for n in s})
            },
        },
        "idle_s": round(meter.elapsed_s, 1),
        "cpu_core_percent_idle": _share(meter),
        "cpu_s_idle": {name: round(s, 3) for name, s in meter.used_s.items()},
        "after_silence": after,
        "doorbell": env.get("CTXBUS_KAFKA_DOORBELL", "default"),
        "ping_every_s": ping_every_s,
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
    warm = result["warm"]
    if warm.get("control_p50_ms"):
        print("  warm controls (this process, no bus): " + _controls(warm["control_p50_ms"]))
    if warm.get("hops_p50_ms"):
        print("  warm hops, p50: " + _hops(warm["hops_p50_ms"]))
    if warm.get("stages_p50_ms"):
        print("  warm stages, p50: " + _hops(warm["stages_p50_ms"]))
    for row in result["after_silence"]:
        print(
            f"  first request after {row['pause_s']:6g} s of silence: {row['end_to_end_ms']:7.1f} ms "
            f"({row['vs_warm_p50']}x the warm p50; context {'yes' if row['with_context'] else 'no'}; "
            f"stack {row['cpu_core_percent']['total']:.1f}% of a core during the pause)"
        )
        if "pings" in row:
            pings = row["pings"]
            print(
                f"      kept warm: {pings['count']} requests during the pause, one every {pings['every_s']:g} s "
                f"(p50 {pings['end_to_end_ms']['p50']:.1f} ms)"
            )
        if "control" in row:
            ratios = row["control_vs_warm"]
            print(
                "      control after the same silence: "
                + _controls(row["control"], ratios)
                + f"; less the embed's own slowdown: {row['net_vs_warm_p50']}x"
            )
        if row.get("hops_ms"):
            faults = ", ".join(f"{n} {c}" for n, c in row.get("major_faults", {}).items())
            print(f"      hops: {_hops(row['hops_ms'])}; major page faults: {faults}")
        if row.get("stages_ms"):
            print(f"      stages: {_hops(row['stages_ms'])}")


def _controls(values: dict[str, float], ratios: dict[str, float] | None = None) -> str:
    names = {"embed_ms": "embed", "loopback_ms": "loopback", "memory_ms": "16 MB read"}
    return ", ".join(
        f"{names.get(n, n)} {v:.2f} ms" + (f" ({ratios[n]}x)" if ratios and n in ratios else "")
        for n, v in values.items()
    )


def _hops(values: dict[str, float]) -> str:
    return ", ".join(f"{n.replace('_', ' ')} {v:.1f}" for n, v in values.items()) + " ms"
