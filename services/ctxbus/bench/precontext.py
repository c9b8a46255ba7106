"""``ctxbus bench precontext``: cost and size of seed 003's pre-context builders on realistic attempt histories.

Builds every kind (circuit breaker, retry, helper) for N synthetic tasks with 1-5 attempts, from
raw stored records as the injector does, and reports build time per context (p50/p99) and its size
in the model's tokens and in lines.
"""

from __future__ import annotations

import random
import time
from typing import Any

from ctxbus.bench.stats import summary
from ctxbus.components import token_counter
from ctxbus.core.precontext import PreContextPolicy, PreContextType, build_precontext
from ctxbus.settings import Settings

FILES = (
    "src/auth/middleware.ts",
    "src/index.ts",
    "src/routes/health.ts",
    "app/navigation/TabNavigator.tsx",
    "src/services/vehicleService.ts",
    "app.json",
    "tests/auth.spec.ts",
    "src/db/migrations/0042_users.sql",
)
ERRORS = (
    "auth routes not registered correctly",
    "endpoint returns 404",
    "Missing unit tests for auth service",
    "Test coverage below 80%",
    "Pagination total count is null in response",
    "Splash screen not configured in app.json",
    "Bottom tab navigation not working",
)
PROVIDERS = ("gemini", "copilot", "cursor", "codex", "claude")


def history(rng: random.Random, task: int) -> list[dict[str, Any]]:
    return [
        {
            "task_id": f"task-{task}",
            "attempt_number": n,
            "provider": rng.choice(PROVIDERS),
            "files_created": rng.sample(FILES, rng.randint(0, 4)),
            "files_updated": rng.sample(FILES, rng.randint(0, 3)),
            "status": "failed",
            "validation_errors": rng.sample(ERRORS, rng.randint(1, 3)),
            "exit_reason": rng.choice(("validation_failure", "circuit_breaker", "execution_error")),
        }
        for n in range(1, rng.randint(1, 5) + 1)
    ]


def run(tasks: int, seed: int = 3) -> dict[str, Any]:
    rng = random.Random(seed)
    count = token_counter(Settings())
    policy = PreContextPolicy()
    histories = [history(rng, t) for t in range(tasks)]
    result: dict[str, Any] = {"tasks": tasks}
    for kind in PreContextType:
        times, tokens, lines = [], [], []
        for attempts in histories:
            started = time.perf_counter()
            text = build_precontext(kind, attempts, policy, count_tokens=count)
            times.append((time.perf_counter() - started) * 1000)
            tokens.append(float(count(text)))
            lines.append(float(len(text.splitlines())))
        result[kind.value] = {"build_ms": summary(times), "tokens": summary(tokens), "lines": summary(lines)}
    return result


def print_report(result: dict[str, Any]) -> None:
    print(f"ctxbus bench precontext: {result['tasks']} tasks with 1-5 attempts each (model tokenizer)")
    for kind in PreContextType:
        r = result[kind.value]
        print(
            f"  {kind.value:16s} build p50 {r['build_ms']['p50']:.3f} ms  p99 {r['build_ms']['p99']:.3f} ms   "
            f"tokens p50 {r['tokens']['p50']:.0f}  max {r['tokens']['max']:.0f}   lines max {r['lines']['max']:.0f}"
        )
