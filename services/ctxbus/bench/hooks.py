"""``ctxbus bench hooks``: the Claude Code hook as Claude Code runs it, a fresh process per call, and the
gateway's round trip alone, as Claude Code's ``http`` hook type makes it.

Loads N memories, starts ``ctxbus up`` (broker, services, gateway), then, one after another and in turn:

- runs the command hook as ``ctxbus hooks install`` writes it (``<python> -S .../ctxbus/hooks/launch.py
  user-prompt-submit``) with the hook JSON on stdin: the wall time of each process, spawn to exit; it reaches
  the gateway over its Unix socket;
- POSTs the same kind of input to ``/v1/hooks`` over a new TCP connection with the secret in a header, from
  this (warm) process (what an ``http`` hook costs, less Claude Code's own HTTP client).

Taken in turn, both see the same machine load. It reports how many answers carried context and any
invalid output.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from ctxbus.bench.corpus import prompts
from ctxbus.bench.stack import PROJECT, bench_stack
from ctxbus.bench.stats import summary
from ctxbus.hooks import launcher
from ctxbus.hooks.wire import read_secret

WARMUP_CALLS = 5


def _hook_command() -> list[str]:
    """What ``ctxbus hooks install`` writes into a personal settings file."""
    python, script = launcher()
    return [python, "-S", script, "user-prompt-submit"]


def _project_dir(data_dir: Path) -> Path:
    """A directory whose project is the benchmark's (an http hook sends no CTXBUS_PROJECT: the cwd says it)."""
    repo = data_dir / "bench-repo"
    (repo / ".claude").mkdir(parents=True, exist_ok=True)
    (repo / ".claude" / "ctxbus.json").write_text(json.dumps({"project": PROJECT}))
    return repo


def hook_input(i: int, prompt: str, cwd: Path) -> bytes:
    return json.dumps(
        {
            "session_id": f"bench-{i % 8}",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
            "cwd": str(cwd),
            "transcript_path": "/dev/null",
        }
    ).encode()


def http_hook_call(port: int, secret: str, body: bytes, timeout_s: float = 30.0) -> bytes:
    """One POST as an ``http`` hook makes it: a new connection, the input as is, the secret; the answer's body."""
    head = (
        f"POST /v1/hooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {secret}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(head.encode("latin-1") + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    status, _, rest = b"".join(chunks).partition(b"\r\n")
    if b" 200 " not in status + b" ":
        raise ValueError(f"gateway answered {status[:80]!r}")
    return rest.partition(b"\r\n\r\n")[2]


def _context_of(output: bytes) -> str | None:
    """The additional context of a valid hook answer; None for an invalid one."""
    try:
        context = json.loads(output)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        return None
    return context if isinstance(context, str) and len(context) <= 10_000 else None


def run(memories_count: int, calls: int, *, distinct: bool = False) -> dict[str, Any]:
    """``distinct``: every prompt made unique, as a user's prompts are (the corpus's repeat: a prompt asked again
    finds its query vector remembered)."""
    walls: list[float] = []
    http_ms: list[float] = []
    with_context = invalid = http_context = http_invalid = 0
    with bench_stack(memories_count, CTXBUS_PROJECT=PROJECT) as stack:
        command = _hook_command()
        cwd = _project_dir(stack.settings.data_dir)
        runtime = json.loads((stack.settings.data_dir / "runtime.json").read_text())
        port, secret = int(runtime["gateway_port"]), read_secret({}, str(stack.settings.data_dir)) or ""
        pairs = prompts(2 * (calls + WARMUP_CALLS))
        if distinct:
            pairs = [(domain, f"{prompt} (case {n})") for n, (domain, prompt) in enumerate(pairs)]
        for i in range(calls + WARMUP_CALLS):
            stdin = hook_input(i, pairs[2 * i][1], cwd)
            started = time.perf_counter()
            done = subprocess.run(command, input=stdin, env=stack.env, capture_output=True, timeout=30, check=False)
            wall = (time.perf_counter() - started) * 1000
            body = hook_input(i, pairs[2 * i + 1][1], cwd)
            started = time.perf_counter()
            try:
                answer: bytes | None = http_hook_call(port, secret, body)
            except (OSError, ValueError):
                answer = None
            http_wall = (time.perf_counter() - started) * 1000
            if i < WARMUP_CALLS:
                continue
            walls.append(wall)
            http_ms.append(http_wall)
            context = _context_of(done.stdout) if done.returncode == 0 else None
            invalid += context is None
            with_context += bool(context)
            http = _context_of(answer) if answer is not None else None
            http_invalid += http is None
            http_context += bool(http)
    return {
        "memories": memories_count,
        "calls": calls,
        "distinct_prompts": distinct,
        "wall_ms": summary(walls),
        "with_context": with_context,
        "invalid_output": invalid,
        "http_ms": summary(http_ms),
        "http_with_context": http_context,
        "http_invalid": http_invalid,
    }


def print_report(result: dict[str, Any]) -> None:
    s, h = result["wall_ms"], result["http_ms"]
    kind = "distinct prompts" if result.get("distinct_prompts") else "the corpus's prompts (about half repeat)"
    print(f"ctxbus bench hooks: {result['calls']} hook processes, {result['memories']} memories, {kind}, stack running")
    print(
        f"  command hook, wall time per process   p50 {s['p50']:6.1f}  p95 {s['p95']:6.1f}  p99 {s['p99']:6.1f}  "
        f"max {s['max']:6.1f} ms"
    )
    print(
        f"  http hook, gateway round trip         p50 {h['p50']:6.1f}  p95 {h['p95']:6.1f}  p99 {h['p99']:6.1f}  "
        f"max {h['max']:6.1f} ms"
    )
    print(
        f"  answers with context {result['with_context']}/{result['calls']} (http {result['http_with_context']}), "
        f"invalid outputs {result['invalid_output']} (http {result['http_invalid']})"
    )
