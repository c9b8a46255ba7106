"""A session as steps (pure): prompts, assistant answers, check runs, edits, interruptions.

Two sources give the same steps: Claude Code's transcript (JSON lines; byte offsets kept for provenance) and the
hook inputs the gateway receives (PostToolUse / PostToolUseFailure for Bash, Edit, Write and MultiEdit, and
UserPromptSubmit's prompt). Shapes read are those of :mod:`ctxbus.core.transcript`; anything else is skipped.
A subagent's (``isSidechain``) edits and check runs are the session's work; its messages are not prompts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbus.capture.checks import (
    check_key,
    checks_in,
    error_lines,
    fails_through_filter,
    main_check,
    piped_failure,
    piped_into_filter,
)
from ctxbus.capture.inner_step import echoed_checks
from ctxbus.core.check_output import exit_code_in, read_result
from ctxbus.core.hook_evidence import tool_evidence
from ctxbus.core.outcome_rules import CheckRun, Verdict
from ctxbus.core.transcript import assistant_text_of, prompt_of

#: tools whose successful calls change files
EDIT_TOOLS = frozenset({"edit", "write", "multiedit"})
SHELL_TOOLS = frozenset({"bash"})
#: characters of a check's output kept (the error signature is read from it)
OUTPUT_CHARS = 20_000
#: characters of one edit's strings kept
EDIT_CHARS = 4_000
#: tool calls remembered while their result has not come
MAX_OPEN_CALLS = 500


@dataclass(frozen=True, slots=True)
class Span:
    """Byte offsets in the transcript of the entries a step rests on (None: not from a transcript)."""

    start: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class PromptStep:
    text: str
    #: an assistant turn came before it in the session (a correction is about that turn)
    after_answer: bool
    span: Span = Span()


@dataclass(frozen=True, slots=True)
class AnswerStep:
    text: str
    span: Span = Span()


@dataclass(frozen=True, slots=True)
class RunStep:
    """A Bash call that runs a check, with its result."""

    run: CheckRun
    output: str
    span: Span = Span()
    #: every check the command line runs, as ``family:kind`` (``ruff check && mypy``: both; ``gradle`` runs tests,
    #: lint and builds under one family, told apart by kind)
    families: tuple[str, ...] = ()
    #: the check commands a passing script runner echoed (``npm test``: ``> vitest run``): it ran those tools too,
    #: so it is a pass of their checks for the session's outcome, and a fix it verifies is no other program passing
    echoed: tuple[str, ...] = ()

    @property
    def echoed_families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(check_key(c) for e in self.echoed for c in checks_in(e)))

    @property
    def all_families(self) -> tuple[str, ...]:
        return self.families or (check_key(self.run.check),)


#: characters of a command kept in a check run (as the outcome rules keep them)
COMMAND_CHARS = 160


def run_step(
    key: str,
    command: str,
    output: str,
    *,
    exit_code: int | None,
    interrupted: bool = False,
    tool_error: bool = False,
    span: Span = Span(),
) -> RunStep | None:
    """The step of a shell call when its command runs a check capture knows (else None)."""
    check = main_check(command)
    if check is None:
        return None
    verdict, rule, detail = read_result(output, exit_code=exit_code, interrupted=interrupted, tool_error=tool_error)
    if verdict is Verdict.PASSED and rule == "exit_code_zero" and piped_into_filter(command):
        said = error_lines(output)[:1] or [line for line in (piped_failure(output),) if line]
        if said:  # ``dotnet build | grep error``, ``flutter test | tail``: the filter's exit code, the check's words
            verdict, rule, detail = Verdict.FAILED, "piped_error_lines", said[0]
    run = CheckRun(key, check, " ".join(command.split())[:COMMAND_CHARS], verdict, rule, detail)
    families = tuple(check_key(c) for c in checks_in(command))
    echoed = echoed_checks(command, output) if verdict is Verdict.PASSED else ()
    return RunStep(run, output[-OUTPUT_CHARS:], span, families, echoed)


@dataclass(frozen=True, slots=True)
class EditStep:
    """A successful Edit, MultiEdit or Write: the file and the old and new strings (a Write: new only)."""

    path: str
    old: str
    new: str
    tool: str
    span: Span = Span()


@dataclass(frozen=True, slots=True)
class ShellStep:
    """A Bash call that runs no check capture knows (an install, a git command, a tool of a stack it has no rule
    for): context for what the user said next, and, when it failed, an error the same command may later pass."""

    command: str
    span: Span = Span()
    #: it exited non-zero (not interrupted)
    failed: bool = False
    #: its output's end, kept when it failed
    output: str = ""


#: what Claude Code answers for a tool call the user turned down
_REJECTED = "doesn't want to proceed with this tool use"


@dataclass(frozen=True, slots=True)
class ResumeStep:
    """A session resumed from an earlier one: what the compaction summary (or the ``summary`` line) says the work
    is. A session whose only prompt is "continue" has its task here."""

    task: str
    span: Span = Span()
    #: from a ``summary`` line (a title), not a compaction summary's request
    title: bool = False


#: the request a compaction summary names (Claude Code writes "Primary Request and Intent:"; others "The user asked
#: to ...")
_PRIMARY = re.compile(r"Primary Request(?: and Intent)?:\s*(?P<task>\S[^\n]*)", re.I)
_ASKED = re.compile(r"\b(?:the user|user) (?:asked|wants|wanted|requested)(?: me)? (?:to )?(?P<task>[^\n]+)", re.I)
RESUME_TASK_CHARS = 300


def resumed_task(summary: str) -> str:
    """The task a compaction summary names, in its words, clipped ("" when it names none)."""
    match = _PRIMARY.search(summary) or _ASKED.search(summary)
    return " ".join(match.group("task").split())[:RESUME_TASK_CHARS] if match else ""


def resumed_task_of(steps: Sequence[Step]) -> str:
    """The task of a resumed session: its compaction summary's request, else its ``summary`` title ("" if neither)."""
    resumed = [s for s in steps if isinstance(s, ResumeStep) and s.task]
    best = [s for s in resumed if not s.title] or resumed
    return best[0].task if best else ""


@dataclass(frozen=True, slots=True)
class InterruptStep:
    """The user interrupted a turn."""

    span: Span = Span()


Step = PromptStep | AnswerStep | RunStep | EditStep | ShellStep | InterruptStep | ResumeStep


def lines_with_offsets(data: bytes, base: int = 0) -> Iterator[tuple[dict[str, Any], Span]]:
    """The JSON objects among complete lines of ``data`` with their byte spans (``base``: the offset of ``data``
    in the file). A torn last line (no newline) and foreign lines are skipped."""
    start = 0
    while True:
        newline = data.find(b"\n", start)
        if newline < 0:
            return
        line = data[start:newline]
        if line.strip():
            try:
                entry = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError):
                entry = None
            if isinstance(entry, dict):
                yield entry, Span(base + start, base + newline + 1)
        start = newline + 1


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(b.get("text", "")) for b in value if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
    return ""


def _content(entry: dict[str, Any]) -> Any:
    message = entry.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _edit_strings(name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
    if name == "write":
        content = tool_input.get("content")
        return ("", content[:EDIT_CHARS]) if isinstance(content, str) else ("", "")
    if name == "multiedit":
        edits = tool_input.get("edits")
        if not isinstance(edits, list):
            return None
        olds = [str(e.get("old_string", "")) for e in edits if isinstance(e, dict)]
        news = [str(e.get("new_string", "")) for e in edits if isinstance(e, dict)]
        return "\n".join(olds)[:EDIT_CHARS], "\n".join(news)[:EDIT_CHARS]
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if not isinstance(new, str):
        return None
    return (old if isinstance(old, str) else "")[:EDIT_CHARS], new[:EDIT_CHARS]


def edit_step(name: str, tool_input: Any, span: Span = Span()) -> EditStep | None:
    """The step of a successful file-changing tool call, or None (another tool, no path)."""
    name = name.lower()
    if name not in EDIT_TOOLS or not isinstance(tool_input, dict):
        return None
    path = tool_input.get("file_path") or tool_input.get("filePath") or tool_input.get("path")
    strings = _edit_strings(name, tool_input)
    if not isinstance(path, str) or not path.strip() or strings is None:
        return None
    return EditStep(path.strip(), strings[0], strings[1], name, span)


def _result_output(block: dict[str, Any], entry: dict[str, Any]) -> tuple[str, bool]:
    response = entry.get("toolUseResult", entry.get("tool_use_result"))
    if isinstance(response, dict) and ("stdout" in response or "stderr" in response):
        return f"{response.get('stdout') or ''}\n{response.get('stderr') or ''}", bool(response.get("interrupted"))
    return _text(block.get("content")), False


class TranscriptSteps:
    """Steps from transcript entries read in order, possibly over several reads (tool calls whose result comes
    in a later read are remembered)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, Any, Span]] = {}
        self.answered = False
        #: the session's directory, from the first entry that names one
        self.cwd: str | None = None

    def read(self, entries: Sequence[tuple[dict[str, Any], Span]]) -> list[Step]:
        steps: list[Step] = []
        for entry, span in entries:
            steps.extend(self._entry(entry, span))
        for stale in list(self.calls)[:-MAX_OPEN_CALLS]:
            del self.calls[stale]
        return steps

    def _entry(self, entry: dict[str, Any], span: Span) -> Iterator[Step]:
        if self.cwd is None and isinstance(entry.get("cwd"), str) and not entry.get("isSidechain"):
            self.cwd = entry["cwd"]
        resumed = self._resumed(entry)
        if resumed:
            yield ResumeStep(resumed, span, title=entry.get("type") == "summary")
            return
        prompt = prompt_of(entry)
        if prompt is not None:
            yield PromptStep(prompt, self.answered, span)
            return
        if entry.get("type") == "assistant" and not entry.get("isSidechain"):
            self.answered = True  # a tool call is a turn too: a prompt after it may correct it
        answer = assistant_text_of(entry)
        if answer:
            yield AnswerStep(answer, span)
        content = _content(entry)
        if entry.get("type") == "user" and not entry.get("isMeta") and "[Request interrupted by user" in _text(content):
            yield InterruptStep(span)
            return
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self.calls[block["id"]] = (str(block.get("name", "")).lower(), block.get("input"), span)
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in self.calls:
                name, tool_input, call_span = self.calls.pop(str(block["tool_use_id"]))
                whole = Span(call_span.start, span.end)
                step = self._result(name, tool_input, block, entry, whole)
                if step is not None:
                    yield step

    @staticmethod
    def _resumed(entry: dict[str, Any]) -> str:
        """The task of a compaction summary entry or a ``summary`` line ("" for any other entry)."""
        if entry.get("type") == "summary" and isinstance(entry.get("summary"), str):
            return " ".join(entry["summary"].split())[:RESUME_TASK_CHARS]
        if entry.get("type") == "user" and entry.get("isCompactSummary") and not entry.get("isSidechain"):
            return resumed_task(_text(_content(entry)))
        return ""

    @staticmethod
    def _result(name: str, tool_input: Any, block: dict[str, Any], entry: dict[str, Any], span: Span) -> Step | None:
        is_error = bool(block.get("is_error"))
        if name in EDIT_TOOLS:
            return None if is_error else edit_step(name, tool_input, span)
        if name not in SHELL_TOOLS or not isinstance(tool_input, dict):
            return None
        command = tool_input.get("command")
        if not isinstance(command, str):
            return None
        output, interrupted = _result_output(block, entry)
        result_text = _text(block.get("content"))
        if is_error and _REJECTED in result_text[:400]:
            return None  # the user turned the call down: it never ran, so it neither failed nor passed
        text = f"{result_text}\n{output}" if is_error else output
        step = run_step(
            str(block["tool_use_id"]),
            command,
            text,
            exit_code=exit_code_in(result_text) if is_error else 0,
            interrupted=interrupted,
            tool_error=is_error,
            span=span,
        )
        if step is not None:
            return step
        failed = is_error and not interrupted and (exit_code_in(result_text) or 1) != 0
        failed = failed or (not is_error and fails_through_filter(command, text))
        return ShellStep(
            " ".join(command.split())[:COMMAND_CHARS], span, failed, text[-OUTPUT_CHARS:] if failed else ""
        )


def transcript_steps(data: bytes, base: int = 0) -> tuple[list[Step], str | None]:
    """Every step of a transcript's bytes (``base``: their offset in the file), and the session's directory."""
    reader = TranscriptSteps()
    steps = reader.read(list(lines_with_offsets(data, base)))
    return steps, reader.cwd


def hook_step(hook_input: dict[str, Any], *, after_answer: bool = False) -> Step | None:
    """The step a hook input shows: a PostToolUse(Failure) of Bash (a check run) or of Edit / Write / MultiEdit
    (an edit), or a UserPromptSubmit's prompt; None for anything else."""
    event = hook_input.get("hook_event_name")
    if event == "UserPromptSubmit":
        prompt = hook_input.get("prompt")
        return PromptStep(prompt.strip(), after_answer) if isinstance(prompt, str) and prompt.strip() else None
    if event not in ("PostToolUse", "PostToolUseFailure"):
        return None
    name = str(hook_input.get("tool_name", "")).lower()
    if name in EDIT_TOOLS:
        return None if event == "PostToolUseFailure" else edit_step(name, hook_input.get("tool_input"))
    tool_input = hook_input.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if name not in SHELL_TOOLS or not isinstance(command, str):
        return None
    response = hook_input.get("tool_response")
    if isinstance(response, dict):
        output = f"{response.get('stdout') or ''}\n{response.get('stderr') or ''}"
    else:
        output = _text(response) if not isinstance(response, str) else response
    error = hook_input.get("error")
    if isinstance(error, str):
        output = f"{error}\n{output}"
    if main_check(command) is None:
        failed = event == "PostToolUseFailure" and not (isinstance(response, dict) and response.get("interrupted"))
        failed = failed or fails_through_filter(command, output)
        return ShellStep(
            " ".join(command.split())[:COMMAND_CHARS], Span(), failed, output[-OUTPUT_CHARS:] if failed else ""
        )
    families = tuple(check_key(c) for c in checks_in(command))
    run = tool_evidence(hook_input)  # the outcome inference's reading of the result, when it knows the check
    if run is not None and not piped_into_filter(command):  # piped: its exit code is the filter's (run_step reads)
        return RunStep(run, output[-OUTPUT_CHARS:], Span(), families)
    failed = event == "PostToolUseFailure"
    code = (exit_code_in(output) or 1) if failed else 0
    key = str(hook_input.get("tool_use_id") or "hook")
    return run_step(key, command, output, exit_code=code, tool_error=failed)
