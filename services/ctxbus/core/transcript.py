"""Claude Code's transcript (JSON lines at ``transcript_path``) -> the evidence the outcome rules read (pure).

The shapes read (every field optional, anything else skipped): an ``assistant`` entry's
``message.content`` holds ``text`` and ``tool_use`` blocks (``id``, ``name``, ``input.command``);
a ``user`` entry holds either the user's prompt (a string, or ``text`` blocks) or ``tool_result``
blocks (``tool_use_id``, ``content``, ``is_error``) with the tool's own response beside them in
``toolUseResult`` (for Bash: ``stdout``, ``stderr``, ``interrupted``; a failed command's result
reads ``Exit code N`` first). Meta entries (``isMeta``, command echoes, compact summaries) are no
prompts; subagent (``isSidechain``) tool calls count as checks, their messages do not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ctxbus.core.check_output import check_run, exit_code_in
from ctxbus.core.feedback_text import read_assistant_report, read_feedback
from ctxbus.core.outcome_rules import AssistantReport, Evidence, Feedback

Entry = dict[str, Any]
#: tool names whose calls are shell commands
SHELL_TOOLS = frozenset({"bash"})
_NOT_PROMPTS = ("<command-", "<local-command-", "<task-notification", "<system-reminder", "<bash-", "Caveat:")


def parse_lines(lines: Iterable[str | bytes]) -> list[Entry]:
    """The JSON objects among ``lines`` (a torn or foreign line is skipped)."""
    entries: list[Entry] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _content(entry: Entry) -> Any:
    message = entry.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
    return ""


def prompt_of(entry: Entry) -> str | None:
    """The user's own prompt in ``entry``, or None (tool results, meta entries, command echoes, subagents)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") or entry.get("isCompactSummary"):
        return None
    content = _content(entry)
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None
    text = _text_of(content).strip()
    if not text or text.startswith(_NOT_PROMPTS) or text.startswith("[Request interrupted"):
        return None
    return text


def assistant_text_of(entry: Entry) -> str | None:
    if entry.get("type") != "assistant" or entry.get("isSidechain"):
        return None
    return _text_of(_content(entry)) or None


def last_turn_start(entries: Sequence[Entry]) -> int:
    """Index of the first entry after the last user prompt (0 when there is none)."""
    for index in range(len(entries) - 1, -1, -1):
        if prompt_of(entries[index]) is not None:
            return index + 1
    return 0


def _result_output(block: dict[str, Any], entry: Entry) -> tuple[str, bool]:
    """(output, interrupted) of a tool result: the tool's own response when there, else the result text."""
    response = entry.get("toolUseResult", entry.get("tool_use_result"))
    if isinstance(response, dict) and ("stdout" in response or "stderr" in response):
        output = f"{response.get('stdout') or ''}\n{response.get('stderr') or ''}"
        return output, bool(response.get("interrupted"))
    return _text_of(block.get("content")), False


def evidence_in(
    entries: Sequence[Entry], *, prompts_as_feedback: bool = False, calls: dict[str, str] | None = None
) -> list[Evidence]:
    """The evidence in ``entries``, in order: check runs (shell tool calls matched with their results),
    the final assistant message's report, and (``prompts_as_feedback``) prompts that follow an
    assistant turn, read as feedback on it. The gateway reads prompts at UserPromptSubmit instead.
    ``calls`` (tool-use id -> command) carries calls whose result comes in a later read; it is updated."""
    calls = {} if calls is None else calls
    found: list[Evidence] = []
    final: tuple[int, str, str] | None = None
    answered = False
    for index, entry in enumerate(entries):
        content = _content(entry)
        text = assistant_text_of(entry)
        if text:
            final, answered = (len(found), str(entry.get("uuid") or f"assistant:{index}"), text), True
        prompt = prompt_of(entry)
        if prompt is not None and prompts_as_feedback and answered:
            read = read_feedback(prompt)
            if read is not None:
                found.append(Feedback(str(entry.get("uuid") or f"prompt:{index}"), *read))
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and str(block.get("name", "")).lower() in SHELL_TOOLS:
                tool_input = block.get("input")
                command = tool_input.get("command") if isinstance(tool_input, dict) else None
                if isinstance(command, str) and isinstance(block.get("id"), str):
                    calls[block["id"]] = command
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                tool_use_id = str(block["tool_use_id"])
                output, interrupted = _result_output(block, entry)
                is_error = bool(block.get("is_error"))
                result_text = _text_of(block.get("content"))
                exit_code = exit_code_in(result_text) if is_error else 0
                run = check_run(
                    tool_use_id,
                    calls.pop(tool_use_id),
                    f"{result_text}\n{output}" if is_error else output,
                    exit_code=exit_code,
                    interrupted=interrupted,
                    tool_error=is_error,
                )
                if run is not None:
                    found.append(run)
    if final is not None:
        at, key, text = final
        report = read_assistant_report(text)
        if report is not None:
            found.insert(at, AssistantReport(key, *report))
    return found
