"""``ctxbus bench hooks``: the Claude Code hook as Claude Code runs it, a fresh process per call.

Loads N memories, starts ``ctxbus up`` (broker, services, gateway), then runs
``ctxbus hook user-prompt-submit`` once per prompt with the hook JSON on stdin,
one after another, and reports the wall time of each process (spawn to exit),
how many answers carried context, and any invalid output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ctxbus.bench.corpus import prompts
from ctxbus.bench.stack import PROJECT, bench_stack
from ctxbus.bench.stats import summary

WARMUP_CALLS = 5


def _hook_command() -> list[str]:
    exe = Path(sys.executable).with_name("ctxbus")
    return [str(exe), "hook", "user-prompt-submit"]


def run(memories_count: int, calls: int) -> dict[str, Any]:
    walls: list[float] = []
    with_context = invalid = 0
    with bench_stack(memories_count, CTXBUS_PROJECT=PROJECT) as stack:
        command = _hook_command()
        for i, (_domain, prompt) in enumerate(prompts(calls + WARMUP_CALLS)):
            stdin = json.dumps(
                {
                    "session_id": f"bench-{i % 8}",
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": prompt,
                    "cwd": str(stack.settings.data_dir),
                    "transcript_path": "/dev/null",
                }
            ).encode()
            started = time.perf_counter()
            done = subprocess.run(command, input=stdin, env=stack.env, capture_output=True, timeout=30, check=False)
            wall = (time.perf_counter() - started) * 1000
            if i < WARMUP_CALLS:
                continue
            walls.append(wall)
            try:
                context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
                with_context += bool(context)
                invalid += done.returncode != 0 or len(context) > 10_000
            except (ValueError, KeyError, TypeError):
                invalid += 1
    return {
        "memories": memories_count,
        "calls": calls,
        "wall_ms": summary(walls),
        "with_context": with_context,
        "invalid_output": invalid,
    }


def print_report(result: dict[str, Any]) -> None:
    s = result["wall_ms"]
    print(f"ctxbus bench hooks: {result['calls']} hook processes, {result['memories']} memories, stack running")
    print(
        f"  wall time per hook process  p50 {s['p50']:6.1f}  p95 {s['p95']:6.1f}  p99 {s['p99']:6.1f}  "
        f"max {s['max']:6.1f} ms"
    )
    print(
        f"  answers with context {result['with_context']}/{result['calls']}, invalid outputs {result['invalid_output']}"
    )
