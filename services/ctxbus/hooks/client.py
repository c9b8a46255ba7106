"""``ctxbus hook EVENT``: what Claude Code runs, a fresh process per call. Standard library only on the
fast path, and not even ``json`` there (with ``re`` it costs ~8 ms a call): the hook input goes to
the local gateway byte for byte over a raw socket, and the gateway's JSON answer goes to stdout.

Whatever happens (gateway down, timeout, malformed input, disabled) it prints valid hook output
within its timeout and exits 0; it logs to a file, never to stdout. When the gateway cannot be
reached, context events fall back to the project's learned-pattern file (seed 002).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a few ms per hook process
    from typing import Any

EVENTS = {
    "user-prompt-submit": "UserPromptSubmit",
    "session-start": "SessionStart",
    "session-end": "SessionEnd",
    "stop": "Stop",
    "post-tool-use": "PostToolUse",
    "post-tool-use-failure": "PostToolUseFailure",
}
CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart")
DEFAULT_TIMEOUT_MS = 2_000
DEFAULT_GATEWAY_PORT = 9470
#: stdin read at most (a bigger hook input is cut, and its prompt with it)
MAX_INPUT_BYTES = 4_000_000
MAX_PROMPT_CHARS = 100_000
MAX_CONTEXT_CHARS = 10_000
#: the watchdog fires this long before the timeout, to print and exit in time
WATCHDOG_MARGIN_S = 0.05
#: time kept for the file fallback when the gateway does not answer
FALLBACK_RESERVE_S = 0.4


class Emitter:
    """Prints the hook output exactly once."""

    def __init__(self) -> None:
        self.done = False

    def emit_raw(self, output: bytes) -> None:
        if self.done:
            return
        self.done = True
        sys.stdout.buffer.write(output)
        sys.stdout.flush()

    def emit(self, output: dict[str, Any]) -> None:
        import json  # noqa: PLC0415  (slow paths only)

        self.emit_raw(json.dumps(output).encode("utf-8"))


def output_for(event: str, context: str, max_chars: int = MAX_CONTEXT_CHARS) -> dict[str, Any]:
    """Claude Code's JSON for adding context (at most ``max_chars``: above 10,000 it is replaced by a preview);
    ``{}`` for events that add none. The gateway answers with the same."""
    if event not in CONTEXT_EVENTS:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context[:max_chars]}}


def empty_output(event: str) -> bytes:
    """Valid output with nothing to add, without importing json (event names need no escaping)."""
    if event not in CONTEXT_EVENTS:
        return b"{}"
    return b'{"hookSpecificOutput": {"hookEventName": "%s", "additionalContext": ""}}' % event.encode()


def data_dir(env: dict[str, str]) -> str:
    if env.get("CTXBUS_DATA_DIR"):
        return env["CTXBUS_DATA_DIR"]
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "ctxbus")


def log(env: dict[str, str], message: str, **fields: Any) -> None:
    """One JSON line in the hook log; a log that cannot be written is not the hook's failure."""
    import json  # noqa: PLC0415  (logging happens on slow paths only)

    path = env.get("CTXBUS_HOOK_LOG_FILE") or os.path.join(data_dir(env), "hook.log")
    line = json.dumps({"ts": time.time(), "event": message, **fields}, default=str)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError as exc:  # stderr is Claude Code's debug channel; stdout stays the hook output
        sys.stderr.write(f"ctxbus hook: cannot write {path}: {exc}; {line}\n")


def gateway_address(env: dict[str, str]) -> tuple[str, int]:
    url = env.get("CTXBUS_GATEWAY_URL", "").strip()
    if url:
        hostport = url.split("://", 1)[-1].split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        return (host or "127.0.0.1"), int(port)
    try:
        with open(os.path.join(data_dir(env), "runtime.json"), encoding="utf-8") as fh:
            return "127.0.0.1", _runtime_gateway_port(fh.read())
    except (OSError, ValueError):
        return "127.0.0.1", int(env.get("CTXBUS_GATEWAY_PORT") or DEFAULT_GATEWAY_PORT)


def _runtime_gateway_port(text: str) -> int:
    """``"gateway_port": N`` from the runtime file, read without json."""
    key = '"gateway_port":'
    at = text.index(key) + len(key)
    digits = text[at:].lstrip().split(",", 1)[0].split("}", 1)[0].strip()
    return int(digits)


def post(address: tuple[str, int], body: bytes, event: str, timeout_s: float, budget_ms: int) -> bytes:
    """POST /v1/hooks over a plain socket (http.client alone costs ~60 ms to import); the answer's body."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection(address, timeout=timeout_s) as sock:
        head = (
            f"POST /v1/hooks HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Ctxbus-Timeout-Ms: {budget_ms}\r\nX-Ctxbus-Hook-Event: {event}\r\n"
            "Connection: close\r\n\r\n"
        )
        sock.sendall(head.encode("latin-1") + body)
        chunks = []
        while True:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head_bytes, _, payload = raw.partition(b"\r\n\r\n")
    status = head_bytes.split(b" ", 2)[1] if head_bytes.count(b" ") >= 1 else b""
    if status != b"200" or not payload.startswith(b"{"):
        raise ValueError(f"gateway answered {head_bytes[:80]!r}")
    return payload


def fallback_context(hook_input: dict[str, Any], env: dict[str, str]) -> str:
    """The learned-pattern file injector (imports pydantic: only when the gateway is out of reach)."""
    from pathlib import Path  # noqa: PLC0415

    from ctxbus.hooks.fallback import DEFAULT_MAX_PATTERNS, context_for_cwd  # noqa: PLC0415

    raw_cwd = hook_input.get("cwd")
    explicit = env.get("CTXBUS_HOOK_MIN_CONFIDENCE")
    return context_for_cwd(
        raw_cwd if isinstance(raw_cwd, str) else None,
        max_patterns=_int(env.get("CTXBUS_HOOK_MAX_PATTERNS"), DEFAULT_MAX_PATTERNS),
        min_confidence=_float(explicit, 0.0) if explicit else None,
        patterns_file=env.get("CTXBUS_HOOK_PATTERNS_FILE") or ".claude/learned_patterns.json",
        home=Path.home(),
    )


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value else default
    except ValueError:
        return default


def _enabled(env: dict[str, str]) -> bool:
    return env.get("CTXBUS_HOOK_ENABLED", "true").strip().lower() not in {"0", "false", "no", "off"}


def read_input(raw: bytes) -> dict[str, Any]:
    import json  # noqa: PLC0415  (slow paths only)

    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except RecursionError:
        raise ValueError("hook input is nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    prompt = data.get("prompt")
    if isinstance(prompt, str) and len(prompt) > MAX_PROMPT_CHARS:
        data["prompt"] = prompt[:MAX_PROMPT_CHARS]
    return data


def request_body(stdin: bytes, event: str) -> bytes:
    """The bytes to post: stdin as is, unless it had to be cut (then re-encoded with the prompt trimmed)."""
    if len(stdin) < MAX_INPUT_BYTES:
        return stdin
    import json  # noqa: PLC0415

    data = read_input(stdin)
    data.setdefault("hook_event_name", event)
    return json.dumps(data).encode("utf-8")


def run(slug: str, stdin: bytes, env: dict[str, str], emitter: Emitter, started: float) -> None:
    event = EVENTS[slug]
    timeout_s = max(0.1, _int(env.get("CTXBUS_HOOK_TIMEOUT_MS"), DEFAULT_TIMEOUT_MS) / 1000.0)
    if not _enabled(env):
        emitter.emit_raw(empty_output(event))
        return
    remaining = timeout_s - (time.monotonic() - started) - FALLBACK_RESERVE_S
    try:
        body = request_body(stdin, event)
        answer = post(gateway_address(env), body, event, max(0.05, remaining), int(remaining * 1000))
        emitter.emit_raw(answer)
        return
    except (OSError, ValueError) as exc:
        log(env, "gateway_unreachable", hook=slug, error=repr(exc), ms=round((time.monotonic() - started) * 1000))
    if event not in CONTEXT_EVENTS:
        emitter.emit({})
        return
    try:
        hook_input = read_input(stdin)
    except ValueError as exc:
        log(env, "hook_input_invalid", hook=slug, error=str(exc), bytes=len(stdin))
        emitter.emit_raw(empty_output(event))
        return
    try:
        context = fallback_context(hook_input, env)
    except Exception as exc:  # the hook must answer whatever the fallback does
        log(env, "fallback_failed", hook=slug, error=repr(exc))
        context = ""
    log(env, "fallback_answered", hook=slug, chars=len(context))
    emitter.emit(output_for(event, context))


def main(argv: list[str]) -> int:
    started = time.monotonic()
    env = dict(os.environ)
    emitter = Emitter()
    slug = argv[0] if argv else ""
    if slug == "learned-patterns":
        return learned_patterns_main(env)
    if slug not in EVENTS:
        # exit 2 would make Claude Code block the prompt or the stop: an unknown name (a typo, or settings
        # written by a newer ctxbus) answers with nothing and exits 0 like every other hook path
        sys.stderr.write(f"ctxbus hook: unknown hook {slug!r}; valid: {', '.join(EVENTS)}, learned-patterns\n")
        log(env, "hook_unknown", hook=slug)
        emitter.emit_raw(b"{}")
        return 0
    event = EVENTS[slug]
    timeout_s = max(0.1, _int(env.get("CTXBUS_HOOK_TIMEOUT_MS"), DEFAULT_TIMEOUT_MS) / 1000.0)

    def watchdog(_signum: int, _frame: object) -> None:
        log(env, "hook_watchdog", hook=slug, ms=round((time.monotonic() - started) * 1000))
        emitter.emit_raw(empty_output(event))
        os._exit(0)

    signal.signal(signal.SIGALRM, watchdog)
    signal.setitimer(signal.ITIMER_REAL, max(0.01, timeout_s - WATCHDOG_MARGIN_S))
    try:
        stdin = sys.stdin.buffer.read(MAX_INPUT_BYTES)
        run(slug, stdin, env, emitter, started)
    except Exception as exc:  # last line of defence: valid output, exit 0
        log(env, "hook_failed", hook=slug, error=repr(exc))
        emitter.emit_raw(empty_output(event))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


def learned_patterns_main(env: dict[str, str]) -> int:
    """Seed 002's learned-pattern injector contract: JSON in, JSON out, always exit 0."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from ctxbus.hooks.fallback import InjectorOutput, failed, inject  # noqa: PLC0415
    from ctxbus.hooks.project import git_root  # noqa: PLC0415

    started = time.monotonic()
    result: InjectorOutput
    try:
        request = json.loads(sys.stdin.buffer.read(MAX_INPUT_BYTES) or b"{}")
        if not isinstance(request, dict):
            raise ValueError("input is not a JSON object")
    except ValueError as exc:
        log(env, "learned_patterns_bad_input", error=str(exc))
        result = failed(started)
    else:
        cwd = os.getcwd()
        patterns_file = env.get("CTXBUS_HOOK_PATTERNS_FILE") or ".claude/learned_patterns.json"
        result = inject(request, project_root=Path(git_root(cwd) or cwd), patterns_file=patterns_file, home=Path.home())
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0
