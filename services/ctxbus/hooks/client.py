"""``ctxbus hook EVENT``: what Claude Code runs, a fresh process per call. Standard library only on the
fast path, and not even ``json`` there (with ``re`` it costs ~8 ms a call): the hook input goes to
the local gateway byte for byte over a raw socket, and the gateway's JSON answer goes to stdout.

Whatever happens (gateway down, timeout, malformed input, disabled) it prints valid hook output
within its timeout and exits 0; it logs to a file, never to stdout. When the gateway cannot be
reached, context events fall back to the project's learned-pattern file (seed 002).
"""

from __future__ import annotations

import os
import sys
import time

from ctxbus.hooks.transport import GatewayRefused, post
from ctxbus.hooks.wire import client_headers

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a few ms per hook process
    import signal as _signal
    from typing import Any
else:  # the C module: ``signal`` imports enum (a few ms per hook process); same functions
    import _signal

EVENTS = {
    "user-prompt-submit": "UserPromptSubmit",
    "session-start": "SessionStart",
    "session-end": "SessionEnd",
    "stop": "Stop",
    "post-tool-use": "PostToolUse",
    "post-tool-use-failure": "PostToolUseFailure",
    "pre-compact": "PreCompact",
}
CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart")
DEFAULT_TIMEOUT_MS = 2_000
#: a hook input this large or larger has its prompt trimmed before posting (ctxbus.hooks.oversize)
MAX_INPUT_BYTES = 4_000_000
#: stdin read at most (a bigger input is read up to here: its prompt is trimmed, its JSON closed)
MAX_READ_BYTES = 16_000_000
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

    from ctxbus.private_dir import make_private_dirs  # noqa: PLC0415

    path = env.get("CTXBUS_HOOK_LOG_FILE") or os.path.join(data_dir(env), "hook.log")
    line = json.dumps({"ts": time.time(), "event": message, **fields}, default=str)
    try:
        make_private_dirs(os.path.dirname(path))
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError as exc:  # stderr is Claude Code's debug channel; stdout stays the hook output
        sys.stderr.write(f"ctxbus hook: cannot write {path}: {exc}; {line}\n")


def site_packages() -> None:
    """Under ``python -S`` (the fast launcher, ``ctxbus.hooks.launch``) the site directories are added only
    when a slow path needs a package from them (the fallback imports pydantic); a no-op otherwise."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site  # noqa: PLC0415

        site.main()


#: the session of a hook input that names none (the gateway's too: ``ctxbus.hooks.requests``)
UNKNOWN_SESSION = "unknown-session"


def session_of(hook_input: dict[str, Any]) -> str:
    """The hook input's session id (stripped, at most 500 characters), else UNKNOWN_SESSION."""
    session = hook_input.get("session_id")
    return session.strip()[:500] if isinstance(session, str) and session.strip() else UNKNOWN_SESSION


def fallback_context(hook_input: dict[str, Any], env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The learned-pattern file injector (imports pydantic: only when the gateway is out of reach): the context,
    and what ``spool_answer`` records of it (count, timing, the confidence floor it was read with)."""
    from pathlib import Path  # noqa: PLC0415

    site_packages()

    from ctxbus.hooks.fallback import DEFAULT_MAX_PATTERNS, answer_for_cwd  # noqa: PLC0415

    raw_cwd = hook_input.get("cwd")
    explicit = env.get("CTXBUS_HOOK_MIN_CONFIDENCE")
    threshold = _float(explicit, 0.0) if explicit else None
    answer = answer_for_cwd(
        raw_cwd if isinstance(raw_cwd, str) else None,
        max_patterns=_int(env.get("CTXBUS_HOOK_MAX_PATTERNS"), DEFAULT_MAX_PATTERNS),
        min_confidence=threshold,
        patterns_file=env.get("CTXBUS_HOOK_PATTERNS_FILE") or ".claude/learned_patterns.json",
        home=Path.home(),
    )
    facts = {"pattern_count": answer["pattern_count"], "retrieval_ms": answer["retrieval_ms"], "threshold": threshold}
    return answer["patterns_context"][:MAX_CONTEXT_CHARS], facts


def spool_answer(
    hook_input: dict[str, Any],
    env: dict[str, str],
    event: str,
    why: str,
    context: str,
    *,
    pattern_count: int,
    retrieval_ms: int,
    threshold: float | None,
) -> None:
    """Record a fallback answer for the bus (``ctxbus.hooks.spool``; the gateway ships it when it is back, and the
    dashboard counts it then), under the project the gateway would have given it."""
    from ctxbus.hooks import spool  # noqa: PLC0415
    from ctxbus.hooks.project import project_for, shorten_project  # noqa: PLC0415

    named = env.get("CTXBUS_PROJECT", "").strip()
    raw_cwd = hook_input.get("cwd")
    cwd = raw_cwd if isinstance(raw_cwd, str) and os.path.isabs(raw_cwd) else os.getcwd()
    project = shorten_project(named) if named else project_for(cwd, env={})
    entry = spool.fallback_record(
        project=project,
        session_id=session_of(hook_input),
        hook_event=event,
        source=spool.CLIENT_FILE,
        why=why,
        context=context,
        pattern_count=pattern_count,
        retrieval_ms=retrieval_ms,
        min_confidence=threshold,
    )
    if spool.record(data_dir(env), entry) is None:
        log(env, "fallback_spool_full", hook=event, limit=spool.MAX_SPOOLED)


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
    """The hook input (its prompt trimmed to MAX_PROMPT_CHARS); ValueError when it is no JSON object."""
    from ctxbus.hooks.oversize import parse, trim_prompt  # noqa: PLC0415  (slow paths only)

    data = parse(raw, cut=len(raw) >= MAX_READ_BYTES)
    trim_prompt(data, MAX_PROMPT_CHARS)
    return data


def request_body(stdin: bytes, event: str, env: dict[str, str] | None = None) -> bytes:
    """The bytes to post: stdin as is, unless it is too large: then re-encoded with the prompt trimmed (logged)."""
    if len(stdin) < MAX_INPUT_BYTES:
        return stdin
    import json  # noqa: PLC0415

    from ctxbus.hooks.oversize import parse, trim_prompt  # noqa: PLC0415

    cut = len(stdin) >= MAX_READ_BYTES
    data = parse(stdin, cut=cut)
    chars = trim_prompt(data, MAX_PROMPT_CHARS)
    data["hook_event_name"] = event  # the sub-command that ran, whatever the input says
    if env is not None and (chars is not None or cut):
        log(env, "prompt_trimmed", hook=event, bytes=len(stdin), chars=chars, kept=MAX_PROMPT_CHARS, cut=cut)
    return json.dumps(data).encode("utf-8")


def run(slug: str, stdin: bytes, env: dict[str, str], emitter: Emitter, started: float) -> None:
    event = EVENTS[slug]
    timeout_s = max(0.1, _int(env.get("CTXBUS_HOOK_TIMEOUT_MS"), DEFAULT_TIMEOUT_MS) / 1000.0)
    if not _enabled(env):
        emitter.emit_raw(empty_output(event))
        return
    remaining = timeout_s - (time.monotonic() - started) - FALLBACK_RESERVE_S
    try:
        body = request_body(stdin, event, env)
        where = data_dir(env)
        answer = post(env, where, body, event, max(0.05, remaining), int(remaining * 1000), client_headers(env, where))
        emitter.emit_raw(answer)
        return
    except GatewayRefused as exc:
        why = "gateway_refused"
        log(env, why, hook=slug, status=exc.status, error=exc.detail)
    except (OSError, ValueError) as exc:
        why = "gateway_unreachable"
        log(env, why, hook=slug, error=repr(exc), ms=round((time.monotonic() - started) * 1000))
    if event not in CONTEXT_EVENTS:
        emitter.emit({})
        return
    try:
        hook_input = read_input(stdin)
    except ValueError as exc:
        log(env, "hook_input_invalid", hook=slug, error=str(exc), bytes=len(stdin))
        emitter.emit_raw(empty_output(event))
        return
    facts: dict[str, Any] | None = None
    try:
        context, facts = fallback_context(hook_input, env)
    except Exception as exc:  # the hook must answer whatever the fallback does
        log(env, "fallback_failed", hook=slug, error=repr(exc))
        context = ""
    log(env, "fallback_answered", hook=slug, chars=len(context))
    emitter.emit(output_for(event, context))  # the answer first; then it is recorded for the bus
    if facts is not None:
        try:
            spool_answer(hook_input, env, event, why, context, **facts)
        except (OSError, ValueError) as exc:  # the hook has answered all the same
            log(env, "fallback_spool_failed", hook=slug, error=repr(exc))


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

    _signal.signal(_signal.SIGALRM, watchdog)
    _signal.setitimer(_signal.ITIMER_REAL, max(0.01, timeout_s - WATCHDOG_MARGIN_S))
    try:
        stdin = sys.stdin.buffer.read(MAX_READ_BYTES)
        run(slug, stdin, env, emitter, started)
    except Exception as exc:  # last line of defence: valid output, exit 0
        log(env, "hook_failed", hook=slug, error=repr(exc))
        emitter.emit_raw(empty_output(event))
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
    return 0


def learned_patterns_main(env: dict[str, str]) -> int:
    """Seed 002's learned-pattern injector contract: JSON in, JSON out, always exit 0."""
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    site_packages()

    from ctxbus.hooks.fallback import InjectorOutput, failed, inject  # noqa: PLC0415
    from ctxbus.hooks.project import git_root  # noqa: PLC0415

    started = time.monotonic()
    result: InjectorOutput
    try:
        request = json.loads(sys.stdin.buffer.read(MAX_INPUT_BYTES) or b"{}")
        if not isinstance(request, dict):
            raise ValueError("input is not a JSON object")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        log(env, "learned_patterns_bad_input", error=str(exc) or type(exc).__name__)
        result = failed(started)
    else:
        cwd = os.getcwd()
        patterns_file = env.get("CTXBUS_HOOK_PATTERNS_FILE") or ".claude/learned_patterns.json"
        result = inject(request, project_root=Path(git_root(cwd) or cwd), patterns_file=patterns_file, home=Path.home())
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0
