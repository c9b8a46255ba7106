"""Reading one check run (tests, a build, a type check, a linter) for the outcome rules: the exit code Claude Code
gives, the ``interrupted`` flag, and the summary lines of the output, in linear time (pure, no I/O). The rules
these readers apply are named in :data:`ctxbus.core.outcome_rules.RULES`."""

from __future__ import annotations

import re

from ctxbus.core.check_commands import check_of_command
from ctxbus.core.outcome_rules import CheckRun, Verdict

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (-?\d+)", re.M)
#: what Claude Code itself writes when the user interrupts a command or its timeout kills it
_INTERRUPTED = re.compile(r"\[Request interrupted by user")
_TIMED_OUT = re.compile(r"^Command timed out", re.M)
_NOT_RUN = re.compile(r"command not found|: not found$|is not recognized as an internal or external command", re.M)
_SECONDS = r"\bin \d+(?:\.\d+)?s\b"
_FAILURE_LINES = re.compile(
    "|".join(
        (
            r"\b[1-9]\d* (?:failed|errors?)\b.*" + _SECONDS,  # pytest
            r"^FAILED \((?:failures|errors)=",  # unittest
            r"^[^\S\n]*+Test(?:s|\sSuites|\sFiles):?[^\S\n]++.*\b[1-9]\d* failed\b",  # jest, vitest
            r"^[^\S\n]*+[1-9]\d* (?:failing|failed)[^\S\n]*$",  # mocha, playwright
            r"^(?:FAIL\b|--- FAIL: )",  # go
            r"test result: FAILED\b",  # cargo
            r"^error(?:\[E\d+\])?: ",  # rustc/cargo, clang driver
            r"\b\d+ (?:examples?|tests?|runs?|specs?),.*\b[1-9]\d* (?:failures?|errors?)\b",  # rspec, minitest, mix
            r"\bwith [1-9]\d* failures?\b",  # swift
            r"\bBUILD FAIL(?:URE|ED)\b",  # maven, gradle
            r"^Failed!\s+-\s+Failed:\s+[1-9]|^Build FAILED\.",  # dotnet
            r"\berror TS\d+:",  # tsc
            r"^Found [1-9]\d* errors?\b|^[1-9]\d* errors?, \d+ warnings?",  # mypy, ruff, tsc, pyright
            r"found [1-9]\d* errors?\b",  # svelte-check
            r"^[^\S\n]*+✖ [1-9]\d* problems?\b",  # eslint
            r"^g?make(?:\[\d+\])?: \*\*\* .*Error \d+",  # make
            r"^[^\s:]+:\d+(?::\d+)?: (?:fatal )?error\b",  # gcc, clang, javac
            r"^(?:FAILURES|ERRORS)!$",  # phpunit
            r"^[^\S\n]*+\S+: FAIL code [1-9]|^ERROR: +\S+: commands failed",  # tox
            r"(?<!\.)\.{3,}+\s*Failed$",  # pre-commit
            r"\b[1-9]\d* of \d+ failed\b",  # cypress
            r"\btests passed, [1-9]\d* tests? failed out of\b",  # ctest
            r"^[^\S\n]*+(?:\u2139|#)[^\S\n]fail[^\S\n][1-9]\d*[^\S\n]*$",  # node:test (spec, tap), TAP's tally
            r"^[^\S\n]*+[1-9]\d* fail[^\S\n]*$",  # bun test
        )
    ),
    re.M,
)
_PASS_LINES = re.compile(
    "|".join(
        (
            r"\b\d+ passed\b.*" + _SECONDS,  # pytest
            r"^OK(?: \(.*\))?$",  # unittest, phpunit
            r"^[^\S\n]*+Test(?:s|\sSuites|\sFiles):?[^\S\n]++.*\b\d+ passed\b",  # jest, vitest
            r"^[^\S\n]*+\d+ (?:passing|passed)\b",  # mocha, playwright
            r"^ok\s+\S+|^PASS$",  # go
            r"test result: ok\.",  # cargo
            r"\b\d+ (?:examples?|tests?|runs?|specs?),.*\b0 failures\b",  # rspec, minitest, mix
            r"\bwith 0 failures\b",  # swift
            r"\bBUILD SUCCESS(?:FUL)?\b",  # maven, gradle
            r"^Passed!|^Build succeeded\.",  # dotnet
            r"^Success: no issues found|^All checks passed!|^0 errors, \d+ warnings?",  # mypy, ruff, pyright
            r"congratulations :\)|^[^\S\n]*+\S+: OK\b",  # tox
            r"(?<!\.)\.{3,}+\s*Passed$",  # pre-commit
            r"\b100% tests passed\b",  # ctest
            r"^[^\S\n]*+(?:\u2139|#)[^\S\n]fail[^\S\n]0[^\S\n]*$",  # node:test (spec, tap), TAP's tally
            r"^[^\S\n]*+0 fail[^\S\n]*$",  # bun test
        )
    ),
    re.M,
)
_NO_TESTS = re.compile(r"no tests ran|collected 0 items|No tests found|no test files|0 tests? (?:ran|run)\b", re.I)
#: output read for summaries: its head and its tail (summaries come last; compiler errors first)
_HEAD_CHARS, _TAIL_CHARS = 60_000, 60_000
#: a longer line is read as its head and its tail: summaries and error lines are short, and a pattern with ``.*``
#: scans the rest of its line once per occurrence of what precedes it (quadratic on one long line). The patterns
#: read blanks at the start of a line without crossing into the next (``[^\S\n]``), possessively, for the same
#: reason: ``^\s*`` re-read every run of blank lines from each line start in it.
_LINE_HEAD_CHARS, _LINE_TAIL_CHARS = 250, 250
_DETAIL_CHARS = 160


def _scan(output: str) -> str:
    text = _ANSI.sub("", output)
    if len(text) > _HEAD_CHARS + _TAIL_CHARS:
        text = text[:_HEAD_CHARS] + "\n" + text[-_TAIL_CHARS:]
    longest = _LINE_HEAD_CHARS + _LINE_TAIL_CHARS
    lines = text.split("\n")
    if any(len(line) > longest for line in lines):
        text = "\n".join(
            line if len(line) <= longest else f"{line[:_LINE_HEAD_CHARS]} … {line[-_LINE_TAIL_CHARS:]}"
            for line in lines
        )
    return text


def _line(match: re.Match[str], text: str) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)].strip(" =\t")[:_DETAIL_CHARS]


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


def _line_start(match: re.Match[str] | None, text: str) -> int:
    return -1 if match is None else text.rfind("\n", 0, match.start()) + 1


#: a runner's closing tally, one count a line (Playwright: ``1 failed``, the failed tests listed, ``1 flaky``, then
#: ``3 passed (14.9s)``): a failed count in it fails the run, whichever count comes last
_TALLY_FAILED = re.compile(r"[^\S\n]*+[1-9]\d* (?:failing|failed)[^\S\n]*$")
_TALLY_PASSED = re.compile(r"[^\S\n]*+\d+ (?:passing|passed)\b")
#: lines a tally's failed list may take between its failed and its passed count
TALLY_LINES = 40


def _one_tally(failure: re.Match[str], passed: re.Match[str] | None, text: str) -> bool:
    """Whether the failure line and the later pass line are counts of one closing tally."""
    if passed is None:
        return False
    start, end = _line_start(failure, text), _line_start(passed, text)
    return (
        _TALLY_FAILED.fullmatch(_raw_line(text, start)) is not None
        and _TALLY_PASSED.match(_raw_line(text, end)) is not None
        and text.count("\n", start, end) <= TALLY_LINES
    )


def _raw_line(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


def read_result(
    output: str, *, exit_code: int | None, interrupted: bool = False, tool_error: bool = False
) -> tuple[Verdict, str, str]:
    """(verdict, rule, detail) of one check run, the rules in :data:`RULES`' order. ``exit_code`` None with
    ``tool_error`` is a tool error without an exit code (the command never ran); None without it is a
    command Claude Code reported as successful. The summary line that comes last decides between a
    failure line and a pass line (a failure wins on the same line), so a log line like ``error: ...``
    printed by a passing test does not outweigh the runner's closing ``5 passed in 0.3s``."""
    text = _scan(output or "")
    if interrupted or _INTERRUPTED.search(text):
        return Verdict.NONE, "tool_interrupted", "interrupted"
    if _TIMED_OUT.search(text):
        return Verdict.NONE, "command_timed_out", "timed out"
    if tool_error and exit_code is None:
        return Verdict.NONE, "check_not_run", "the tool reported an error before running the command"
    failure, passed = _last(_FAILURE_LINES, text), _last(_PASS_LINES, text)
    if failure is not None and (
        _line_start(failure, text) >= _line_start(passed, text) or _one_tally(failure, passed, text)
    ):
        return Verdict.FAILED, "failure_summary", _line(failure, text)
    if exit_code:
        if exit_code in {126, 127} or (passed is None and _NOT_RUN.search(text)):
            return Verdict.NONE, "check_not_run", f"exit code {exit_code}: the command did not run"
        if passed is None and _NO_TESTS.search(text):
            return Verdict.NONE, "no_tests_ran", "no tests ran"
        return Verdict.FAILED, "exit_code_nonzero", f"exit code {exit_code}"
    if passed is not None:
        return Verdict.PASSED, "pass_summary", _line(passed, text)
    if _NO_TESTS.search(text):
        return Verdict.NONE, "no_tests_ran", "no tests ran"
    return Verdict.PASSED, "exit_code_zero", "exit code 0"


def exit_code_in(text: str) -> int | None:
    """The ``Exit code N`` Claude Code writes at the head of a failed command's result."""
    match = _EXIT_CODE.search(text[:2_000])
    return int(match.group(1)) if match else None


def check_run(
    key: str, command: str, output: str, *, exit_code: int | None, interrupted: bool = False, tool_error: bool = False
) -> CheckRun | None:
    """The evidence of one Bash call, or None when its command runs no check."""
    check = check_of_command(command)
    if check is None:
        return None
    verdict, rule, detail = read_result(output, exit_code=exit_code, interrupted=interrupted, tool_error=tool_error)
    return CheckRun(key, check, " ".join(command.split())[:_DETAIL_CHARS], verdict, rule, detail)
