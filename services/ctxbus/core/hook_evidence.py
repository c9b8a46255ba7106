"""Claude Code hook inputs -> outcome evidence (pure): a Bash call's result, the user's next prompt.

PostToolUse fires only for a command that succeeded (Claude Code's Bash response then holds
``stdout``, ``stderr``, ``interrupted``, and sometimes ``returnCodeInterpretation``; no exit code,
though one is read if a version sends it). A command that exits non-zero is a tool error: it
reaches PostToolUseFailure, whose ``error`` reads ``Exit code N`` and the output, with
``is_interrupt``. The rules that read them are in :mod:`ctxbus.core.outcome_rules`.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

from ctxbus.core.check_output import check_run, exit_code_in
from ctxbus.core.feedback_text import read_feedback
from ctxbus.core.outcome_rules import CheckRun, Feedback
from ctxbus.core.transcript import SHELL_TOOLS

POST_TOOL_USE = "PostToolUse"
POST_TOOL_USE_FAILURE = "PostToolUseFailure"
TOOL_EVENTS = (POST_TOOL_USE, POST_TOOL_USE_FAILURE)
#: exit code fields a tool response might carry (Claude Code's Bash response has none today)
_EXIT_FIELDS = ("exit_code", "exitCode", "returncode", "return_code", "code")
_STATUS_CODE = re.compile(r"(?:status|exit) code:? (-?\d+)", re.I)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def tool_evidence(hook_input: dict[str, Any]) -> CheckRun | None:
    """The check run a PostToolUse / PostToolUseFailure input reports, or None (another tool, no check)."""
    event = hook_input.get("hook_event_name")
    if event not in TOOL_EVENTS or _text(hook_input.get("tool_name")).lower() not in SHELL_TOOLS:
        return None
    tool_input = hook_input.get("tool_input")
    command = _text(tool_input.get("command")) if isinstance(tool_input, dict) else ""
    if not command.strip():
        return None
    key = _text(hook_input.get("tool_use_id")) or f"hook-{uuid.uuid4().hex}"
    if event == POST_TOOL_USE_FAILURE:
        error = _text(hook_input.get("error")) or _text(hook_input.get("error_message"))
        code = exit_code_in(error)
        if code is None and (status := _STATUS_CODE.search(error[:500])):
            code = int(status.group(1))
        interrupted = bool(hook_input.get("is_interrupt"))
        return check_run(key, command, error, exit_code=code, interrupted=interrupted, tool_error=True)
    response = hook_input.get("tool_response")
    if isinstance(response, dict):
        output = f"{_text(response.get('stdout'))}\n{_text(response.get('stderr'))}"
        codes = [response[f] for f in _EXIT_FIELDS if isinstance(response.get(f), int)]
        interrupted = bool(response.get("interrupted"))
    else:
        output, codes, interrupted = _text(response), [], False
    return check_run(key, command, output, exit_code=codes[0] if codes else 0, interrupted=interrupted)


def prompt_key(prompt: str, marker: object) -> str:
    """A stable key for a prompt in a session: its text and where in the session it came (``marker``)."""
    digest = hashlib.sha256(prompt.encode("utf-8", "replace")).hexdigest()[:16]
    return f"prompt-{digest}-{marker}"


def prompt_evidence(prompt: Any, key: str) -> Feedback | None:
    """The user's next prompt as feedback on the previous turn, when it is explicit feedback."""
    if not isinstance(prompt, str):
        return None
    read = read_feedback(prompt)
    return Feedback(key, *read) if read is not None else None
