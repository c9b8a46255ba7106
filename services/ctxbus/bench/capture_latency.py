"""``ctxbus bench capture --stop-latency``: the Stop hook's latency with session capture on and off, in one run.

One ``ctxbus up`` stack; two repositories of two projects, one with capture on, one whose ``.claude/ctxbus.json``
says ``"capture": false``. Each round runs the Stop hook as ``ctxbus hooks install`` writes it (a fresh process,
``.../ctxbus/hooks/launch.py stop``) once for each, in alternating order, over a shipped transcript that fails a
test, fixes it and passes it (``bench/data/outcomes/020_pytest_fail_then_fixed.jsonl``), each call a new session: with
capture on, every Stop makes the gateway read the transcript, capture it and publish its items (the store's owner
embeds them) after answering. The wall time of each hook process, spawn to exit, is what Claude Code waits for.
Paired rounds see the same machine load; the report gives both p50s, their ratio and a bootstrap interval of the
paired difference. Rounds are ``gap_s`` apart (1 s by default), as Stop hooks are at least a turn apart: a capture
(which starts ``CTXBUS_CAPTURE_DELAY_MS`` after its answer) then runs between rounds, as it does in use, not during
the next hook (``--gap-ms 0``: back to back, the worst case on a 2-core machine).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from ctxbus.bench.intervals import bootstrap_mean
from ctxbus.bench.stack import bench_stack
from ctxbus.bench.stats import summary
from ctxbus.hooks import launcher

TRANSCRIPT = Path(__file__).parent / "data" / "outcomes" / "020_pytest_fail_then_fixed.jsonl"
WARMUP = 3
#: how long the last round's capture may take to finish before the stack stops (it is not measured)
SETTLE_S = 2.0


def _repo(root: Path, name: str, capture: bool) -> Path:
    repo = root / name
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / ".claude").mkdir(exist_ok=True)
    config: dict[str, Any] = {"project": f"bench/{name}"} | ({} if capture else {"capture": False})
    (repo / ".claude" / "ctxbus.json").write_text(json.dumps(config))
    return repo


def _stop(command: list[str], env: dict[str, str], repo: Path, transcript: Path, session: str) -> tuple[float, bool]:
    stdin = json.dumps(
        {"session_id": session, "hook_event_name": "Stop", "cwd": str(repo), "transcript_path": str(transcript)}
    ).encode()
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, env=env, capture_output=True, timeout=60, check=False)
    wall = (time.perf_counter() - started) * 1000
    return wall, done.returncode == 0 and done.stdout.strip() == b"{}"


def run(rounds: int, gap_s: float = 1.0) -> dict[str, Any]:
    python, script = launcher()
    command = [python, "-S", script, "stop"]
    on_ms: list[float] = []
    off_ms: list[float] = []
    invalid = 0
    with bench_stack(0) as stack:
        root = stack.settings.data_dir / "capture-bench"
        on_repo, off_repo = _repo(root, "capture-on", True), _repo(root, "capture-off", False)
        transcript = root / "session.jsonl"
        transcript.write_bytes(TRANSCRIPT.read_bytes())
        for i in range(rounds + WARMUP):
            time.sleep(gap_s)
            order = [(on_repo, on_ms), (off_repo, off_ms)]
            if i % 2:
                order.reverse()
            for repo, walls in order:
                wall, valid = _stop(command, stack.env, repo, transcript, f"bench-{repo.name}-{i}")
                if i >= WARMUP:
                    walls.append(wall)
                    invalid += not valid
        time.sleep(SETTLE_S)
    diffs = [a - b for a, b in zip(on_ms, off_ms, strict=True)]
    on, off = summary(on_ms), summary(off_ms)
    return {
        "rounds": rounds,
        "gap_s": gap_s,
        "transcript_bytes": TRANSCRIPT.stat().st_size,
        "capture_on_ms": on,
        "capture_off_ms": off,
        "p50_ratio": on["p50"] / off["p50"] if off["p50"] else None,
        "paired_difference_ms": {
            "mean": sum(diffs) / len(diffs) if diffs else None,
            "interval": list(bootstrap_mean(diffs)) if diffs else None,
        },
        "invalid_output": invalid,
    }


def print_report(result: dict[str, Any]) -> None:
    on, off = result["capture_on_ms"], result["capture_off_ms"]
    print(
        f"ctxbus bench capture --stop-latency: {result['rounds']} paired Stop hooks, a fresh process each, "
        f"rounds {result['gap_s']:g} s apart"
    )
    print(f"  capture on : p50 {on['p50']:.1f} ms  p95 {on['p95']:.1f} ms  max {on['max']:.1f} ms")
    print(f"  capture off: p50 {off['p50']:.1f} ms  p95 {off['p95']:.1f} ms  max {off['max']:.1f} ms")
    diff = result["paired_difference_ms"]
    low, high = diff["interval"] or (float("nan"), float("nan"))
    print(
        f"  p50 on/off {result['p50_ratio']:.3f}; paired difference on - off {diff['mean']:.1f} ms "
        f"(95% interval {low:.1f} .. {high:.1f})"
    )
    print(f"  invalid hook output: {result['invalid_output']}")
