"""Every rule ctxbus uses to infer an outcome from what Claude Code shows its hooks, named (pure, no I/O).

Three kinds of evidence, each read by named rules (:data:`RULES` lists them all, with what each
reads and what it implies):

- a **check run**: a Bash command that runs tests, a build, a type check or a linter
  (:mod:`ctxbus.core.check_commands` says which commands are checks) and its result: the exit
  code when Claude Code gives one, the ``interrupted`` flag, and summary lines of the output
  (``3 failed, 10 passed in 1.2s``, ``BUILD FAILURE``, ``error TS2322``). Only check commands are
  read: a ``grep FAILED`` or a ``cat test.log`` is never evidence, whatever it prints;
- **user feedback**: the user's next prompt about the previous turn ("that worked", "still
  failing", "not quite");
- an **assistant report**: the final assistant message admitting failure or a partial result
  (claims of success are not read: they are not evidence).

:func:`decide` turns an ordered sequence of evidence into one outcome: user feedback that no
check followed decides; else the last run of each check family decides (a failure fixed by a later
pass of the same check is a success); else an assistant report; ``unknown`` only without evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ctxbus.contract.payloads import Outcome
from ctxbus.core.check_commands import BUILD, TEST, TYPECHECK, Check, check_of_command


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    reads: str
    implies: str


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    #: the run says nothing about the work (interrupted, timed out, not run, no tests collected)
    NONE = "no verdict"


@dataclass(frozen=True, slots=True)
class CheckRun:
    key: str
    check: Check
    command: str
    verdict: Verdict
    rule: str
    detail: str


@dataclass(frozen=True, slots=True)
class Feedback:
    key: str
    outcome: Outcome
    rule: str
    phrase: str


@dataclass(frozen=True, slots=True)
class AssistantReport:
    key: str
    outcome: Outcome
    rule: str
    phrase: str


Evidence = CheckRun | Feedback | AssistantReport


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    #: the deciding rule first, then the rules that read the evidence it used
    rules: tuple[str, ...]
    notes: str
    #: keys of every piece of evidence the decision covered (counted once: see the gateway)
    keys: tuple[str, ...]


_R = Rule
RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        # -- reading one check run ------------------------------------------------------------------------------
        _R("tool_interrupted", "the Bash response's `interrupted` flag, `[Request interrupted by user`", "no verdict"),
        _R("command_timed_out", "`Command timed out` in the tool result", "no verdict"),
        _R("check_not_run", "a tool error without an exit code, `command not found`, exit code 126/127", "no verdict"),
        _R(
            "failure_summary",
            "a failure line in the check's output (`N failed`, `FAILED (failures=`, `--- FAIL`, "
            "`test result: FAILED`, `BUILD FAILURE`, `error TS`, `Found N errors`, `make: ***`, `file:1:2: error`)",
            "the run failed",
        ),
        _R(
            "exit_code_nonzero",
            "exit code N != 0 (PostToolUseFailure, the transcript's `Exit code N`, an exit code field)",
            "the run failed",
        ),
        _R(
            "pass_summary",
            "a pass line and no failure line (`N passed in`, `Tests: N passed`, `ok pkg`, "
            "`test result: ok`, `BUILD SUCCESS`, `All checks passed!`)",
            "the run passed",
        ),
        _R(
            "no_tests_ran",
            "`no tests ran`, `collected 0 items`, `No tests found`, `no test files` and no pass line",
            "no verdict",
        ),
        _R(
            "exit_code_zero",
            "the command succeeded (PostToolUse fires only then; exit code 0) with no failure line",
            "the run passed",
        ),
        # -- the user's next prompt -----------------------------------------------------------------------------
        _R(
            "user_reports_partial",
            "next prompt: `not quite`, `almost`, `close, but`, `partly works`, `only half of it`, `works but ...`",
            "partial",
        ),
        _R(
            "user_reports_failure",
            "next prompt: `still failing`, `doesn't work`, `that broke X`, `same error`, "
            "`now I get an error`, `still getting this`, `now the page is blank`, `tests are failing`, `that's wrong`, "
            "`doesn't look right`, `revert that`, a leading `no,`",
            "failed",
        ),
        _R(
            "user_confirms_success",
            "next prompt: `that worked`, `works now`, `it works`, `fixed it`, `looks good`, `all good`, `much better`, "
            "`lgtm`, `all tests pass`, `does what I wanted` (not in a question, not `make sure it works`)",
            "successful",
        ),
        _R("user_approves", "next prompt starting `perfect`, `great`, `awesome`, `nice`, `thanks` ...", "successful"),
        # -- the final assistant message ------------------------------------------------------------------------
        _R(
            "assistant_reports_partial",
            "final assistant message: `partially`, `one test still fails`, `remaining failures`, "
            "`not yet implemented`, `migrated 7 of the 9`",
            "partial",
        ),
        _R(
            "assistant_reports_failure",
            "final assistant message: `I was unable to`, `I wasn't able to`, `I couldn't fix`, "
            "`tests are still failing`, `I'm stuck`",
            "failed",
        ),
        # -- deciding -------------------------------------------------------------------------------------------
        _R("user_feedback_decides", "the last user feedback, when no check ran after it", "its outcome"),
        _R(
            "checks_fixed",
            "the last run of every check family passed after an earlier failure (a failed `cargo build`, `go build` "
            "... counts as fixed by a later passing test run of the same toolchain, which compiles it)",
            "successful",
        ),
        _R("checks_passed", "the last run of every check family passed", "successful"),
        _R(
            "checks_passed_with_reported_gap",
            "checks passed but the final assistant message reports a failure or a gap",
            "partial",
        ),
        _R("checks_failed", "the last run of every check family failed", "failed"),
        _R("tests_failed", "the last run of a test family failed, other checks passed", "failed"),
        _R("checks_mixed", "tests passed (or none ran) but a build, type check or linter's last run failed", "partial"),
        _R("assistant_report_decides", "no check, no feedback: the final assistant message's report", "its outcome"),
        _R("no_evidence", "nothing above (interrupted or unrecognised commands are not evidence)", "unknown"),
    )
}

# -- reading a check run --------------------------------------------------------------------------------------

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
    if failure is not None and _line_start(failure, text) >= _line_start(passed, text):
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


# -- reading the user's next prompt ---------------------------------------------------------------------------

#: only the head of a prompt is read for feedback (the rest is usually a new request or a pasted log)
FEEDBACK_HEAD_CHARS = 300
_META = re.compile(r"^\s*(?:<[a-z][\w-]*>|\[Request interrupted|Caveat:|/[a-z]|This session is being continued)")
_PARTIAL = re.compile(
    r"\bnot quite\b|\balmost\b|\bclose,? but\b|\bcloser\b|\b(?:partly|partially|half) (?:works|working|fixed|there|"
    r"done)\b|\bmostly (?:works|working|fixed|there|good)\b|\b(?:only )?(?:half|part) of (?:it|this|that|them)\b"
)
_POSITIVE = re.compile(r"\b(?:works|worked|working|fixed|better|passes|passing|good|great|progress|builds|compiles)\b")
_BUT = re.compile(r"\b(?:but|except|although|however|though)\b")
_REQUEST = re.compile(r"^\W*(?:can you|could you|please|also|now|let'?s|i'?d like|would you|maybe|let me)\b")
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bno longer)\s+(?:\w+\s+)?$")
_FAILURE = re.compile(
    "|".join(
        (
            r"\bstill\b[^.!?\n]{0,40}\b(?:fail\w*|broken|break\w*|error\w*|crash\w*|wrong|not work\w*|"
            r"doesn'?t work|does not work|same)\b",
            r"\b(?:it|this|that|they|tests?|the build|build|app|page|code|fix|change|everything|still)\s+"
            r"(?:\w+\s+){0,2}?(?:doesn'?t|does not|didn'?t|did not|isn'?t|is not|aren'?t|are not|won'?t|not)\s+"
            r"(?:seem to\s+|actually\s+|really\s+)?(?:work|working|fix|fixed|compile|compiling|build|building|pass|"
            r"passing)\b",
            r"\bnot working\b|\b(?:doesn'?t|does not|didn'?t|did not) work\b|\bno luck\b",
            r"\bstill (?:getting|seeing|get|see|happening|happens|there|the case|occurs|reproduces)\b",
            r"\bnow (?:the \w+ |it |everything |this )?(?:is |are |looks )?(?:blank|empty|gone|broken|missing)\b",
            r"\b(?:doesn'?t|does not|didn'?t|isn'?t|is not)\s+(?:look\s+|seem\s+)?(?:right|correct)\b",
            r"\b(?:that|this|it|you|your (?:change|fix|edit|commit))\s+(?:just\s+)?(?:broke|breaks|has broken|"
            r"introduced (?:a |an )?(?:bug|regression|error))\b",
            r"\b(?:same|new|another) (?:error|exception|failure|traceback)\b|\bsame (?:issue|problem|bug)\b",
            r"\b(?:i'?m|i am|i|we|we'?re|still|now)\s+(?:still\s+)?(?:getting|seeing|get|see)\s+(?:an?\s+|the\s+|"
            r"this\s+|these\s+|same\s+|new\s+)*(?:error|errors|exception|traceback|crash|failure|failures)\b",
            r"\b(?:tests?|the tests|build|the build|ci|pipeline|app|server|page)\s+(?:is|are)?\s*(?:still\s+)?"
            r"(?:failing|fails|failed|red|broken|crashing|crashes)\b",
            r"^(?:no|nope|nah)\s*[,.!]",
            r"\b(?:that'?s|that is|this is|it'?s|it is)\s+(?:still\s+)?(?:wrong|incorrect|not (?:right|correct|what "
            r"i (?:asked|wanted|meant)))\b",
            r"\b(?:revert|undo|roll back|rollback)\s+(?:that|this|it|your|the|those|these|all)\b",
        )
    )
)
_SUCCESS = re.compile(
    "|".join(
        (
            r"\b(?:that|this|it|which|everything|all)\s+(?:now\s+)?(?:worked|works|is working|fixed it|did it|"
            r"did the trick|solved it)\b",
            r"\b(?:works|working|fixed|passing|passes|green)\s+now\b",
            r"\bnow (?:it |everything )?(?:works|passes|builds|compiles)\b",
            r"\b(?:works|worked) (?:great|perfectly|fine|like a charm|as expected|for me)\b",
            r"\b(?:lgtm|looks good|looks great|ship it|nailed it|problem solved|all (?:tests )?(?:pass|passing|green)|"
            r"tests (?:now )?pass)\b",
            r"\b(?:you|that|this) fixed (?:it|the)\b",
            r"\ball good\b|\bmuch better\b|\b(?:does|did|is) (?:exactly )?what i (?:wanted|asked for|needed)\b",
            r"\bexactly what i (?:wanted|needed|asked for)\b",
        )
    )
)
_APPROVAL = re.compile(
    r"^\W*(?:perfect|excellent|awesome|great|nice|brilliant|fantastic|amazing|wonderful|cool|sweet|thanks|"
    r"thank you|thx|ty)\b"
)
_HEDGE = re.compile(r"\b(?:make sure|ensure|check|verify|see if|whether|if|until|so that|confirm)\b[^.!?]*$")
_CLAUSE = re.compile(r",\s*but\b|;|\bbut\b")
#: a failure phrase right after these words describes a wish or a condition, not what happened
_CONDITION = re.compile(r"\b(?:so|when|if|unless|until|should|make|ensure|whenever|to|that)\s+(?:the\s+)?$")


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").lower().split())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?\n])\s+", text) if s.strip()]


def _positive_but(head: str) -> str | None:
    for sentence in _sentences(head):
        for positive in _POSITIVE.finditer(sentence):
            if _NEGATED.search(sentence[: positive.start()]):
                continue
            rest = sentence[positive.end() :]
            but = _BUT.search(rest[:80])
            if but and not _REQUEST.match(rest[but.end() :]):
                return sentence[positive.start() : positive.end() + but.end()]
    return None


def read_feedback(prompt: str) -> tuple[Outcome, str, str] | None:
    """(outcome, rule, phrase) when the prompt is explicit feedback about the previous turn, else None."""
    if not isinstance(prompt, str) or _META.match(prompt):
        return None
    head = _normalise(prompt[:FEEDBACK_HEAD_CHARS])
    partial = _PARTIAL.search(head)
    if partial:
        return Outcome.PARTIAL, "user_reports_partial", partial.group(0)
    phrase = _positive_but(head)
    if phrase:
        return Outcome.PARTIAL, "user_reports_partial", phrase
    for failure in _FAILURE.finditer(head):
        if not _CONDITION.search(head[max(0, failure.start() - 12) : failure.start()]):
            return Outcome.FAILED, "user_reports_failure", failure.group(0)
    for sentence in _sentences(head):
        for clause in _CLAUSE.split(sentence):
            success = _SUCCESS.search(clause)
            if success and not clause.rstrip().endswith("?") and not _HEDGE.search(clause[: success.start()]):
                return Outcome.SUCCESSFUL, "user_confirms_success", success.group(0)
    approval = _APPROVAL.match(head)
    if approval and not head.split(".")[0].rstrip().endswith("?"):
        return Outcome.SUCCESSFUL, "user_approves", approval.group(0).strip(" ,.!")
    return None


# -- reading the final assistant message ----------------------------------------------------------------------

_ASSISTANT_PARTIAL = re.compile(
    r"\b(?:partially|partly)\b|\b(?:one|two|three|[1-9]\d*|some|a few|several) (?:of the )?(?:tests?|cases?|"
    r"checks?|specs?) (?:still |are still |is still )?(?:fail|failing|remain)|(?<!no )\bremaining (?:failure|"
    r"failures|issue|issues|problem|errors?)\b|\bnot yet (?:implemented|finished|complete|done)\b|\bis not (?:yet )?"
    r"implemented\b"
)
_ASSISTANT_FAILURE = re.compile(
    r"\bi (?:was|am|'m) (?:unable|not able) to\b|\bi (?:wasn't|was not) able to\b|\bi (?:could not|couldn't|can't|"
    r"cannot) (?:get|make|fix|resolve|"
    r"reproduce|figure out|determine|complete|finish)\b|\b(?:tests?|build|suite|it|the fix) (?:is |are )?still "
    r"(?:fail|failing|broken|erroring)\b|\bi'm stuck\b"
)


_SOME_OF = re.compile(
    r"\b(?:migrated|fixed|updated|converted|ported|implemented|moved|handled|covered) (\d+) (?:of|out of) "
    r"(?:the )?(\d+)\b"
)


def read_assistant_report(text: str) -> tuple[Outcome, str, str] | None:
    """(outcome, rule, phrase) when the final assistant message admits a failure or a partial result."""
    body = _normalise(text or "")
    partial = _ASSISTANT_PARTIAL.search(body)
    if partial:
        return Outcome.PARTIAL, "assistant_reports_partial", partial.group(0)
    for some in _SOME_OF.finditer(body):
        if int(some.group(1)) < int(some.group(2)):
            return Outcome.PARTIAL, "assistant_reports_partial", some.group(0)
    failure = _ASSISTANT_FAILURE.search(body)
    if failure:
        return Outcome.FAILED, "assistant_reports_failure", failure.group(0)
    return None


# -- deciding -------------------------------------------------------------------------------------------------

_MAX_NOTES = 2_000


def _describe(e: Evidence) -> str:
    if isinstance(e, CheckRun):
        return f"[{e.check.kind}] `{e.command}` {e.verdict.value} ({e.rule}: {e.detail})"
    who = "user" if isinstance(e, Feedback) else "assistant"
    return f"{who} said {e.phrase!r} ({e.rule}: {e.outcome.value})"


def _decision(outcome: Outcome, rule: str, used: Sequence[Evidence], covered: Sequence[Evidence]) -> Decision:
    reading = tuple(dict.fromkeys(e.rule for e in used))
    lines = "; ".join(_describe(e) for e in covered)
    notes = f"{rule}: {RULES[rule].reads}. evidence: {lines or 'none'}"
    return Decision(outcome, (rule, *reading), notes[:_MAX_NOTES], tuple(e.key for e in covered))


def _compiled_later(at: int, run: CheckRun, runs: Sequence[tuple[int, CheckRun]]) -> bool:
    """A failed build of a compiling toolchain that a later passing test run of the same toolchain compiled."""
    return (
        run.verdict is Verdict.FAILED
        and run.check.kind in {BUILD, TYPECHECK}
        and run.check.toolchain is not None
        and any(
            i > at and r.verdict is Verdict.PASSED and r.check.kind == TEST and r.check.toolchain == run.check.toolchain
            for i, r in runs
        )
    )


def decide(evidence: Sequence[Evidence]) -> Decision:
    """One outcome from evidence in the order it happened (see the module's docstring)."""
    feedback = [(i, e) for i, e in enumerate(evidence) if isinstance(e, Feedback)]
    runs = [(i, e) for i, e in enumerate(evidence) if isinstance(e, CheckRun) and e.verdict is not Verdict.NONE]
    if feedback and not any(i > feedback[-1][0] for i, _ in runs):
        return _decision(feedback[-1][1].outcome, "user_feedback_decides", [feedback[-1][1]], evidence)
    reports = [(i, e) for i, e in enumerate(evidence) if isinstance(e, AssistantReport)]
    if runs:
        last: dict[str, tuple[int, CheckRun]] = {}
        failed_before = False
        for i, run in runs:
            previous = last.get(run.check.family)
            failed_before |= previous is not None and previous[1].verdict is Verdict.FAILED
            last[run.check.family] = (i, run)
        finals = [run for i, run in last.values() if not _compiled_later(i, run, runs)]
        failed_before |= len(finals) < len(last)
        if all(r.verdict is Verdict.PASSED for r in finals):
            gap = [r for i, r in reports if i > runs[-1][0]]
            if gap:
                return _decision(Outcome.PARTIAL, "checks_passed_with_reported_gap", [*finals, gap[-1]], evidence)
            return _decision(Outcome.SUCCESSFUL, "checks_fixed" if failed_before else "checks_passed", finals, evidence)
        if all(r.verdict is Verdict.FAILED for r in finals):
            return _decision(Outcome.FAILED, "checks_failed", finals, evidence)
        if any(r.verdict is Verdict.FAILED and r.check.kind == TEST for r in finals):
            return _decision(Outcome.FAILED, "tests_failed", finals, evidence)
        return _decision(Outcome.PARTIAL, "checks_mixed", finals, evidence)
    if reports:
        report = reports[-1][1]
        return _decision(report.outcome, "assistant_report_decides", [report], evidence)
    return _decision(Outcome.UNKNOWN, "no_evidence", [], evidence)
