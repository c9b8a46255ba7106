"""Every rule ctxbus uses to infer an outcome from what Claude Code shows its hooks, named (pure, no I/O).

Three kinds of evidence, each read by named rules (:data:`RULES` lists them all, with what each
reads and what it implies):

The readers live beside this module: :mod:`ctxbus.core.check_output` (check runs) and
:mod:`ctxbus.core.feedback_text` (user feedback, assistant reports).

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
pass of the same check is a success, and so is one a later pass of the project's whole-check script run through
the same tool ran again: ``make test`` failing, then ``make check`` passing); else an assistant report; ``unknown``
only without evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ctxbus.contract.payloads import Outcome
from ctxbus.core.check_commands import BUILD, TEST, TYPECHECK, Check, is_aggregate, same_tool


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
            "... counts as fixed by a later passing test run of the same toolchain, which compiles it; a failed "
            "`make test` by a later passing `make check`, the project's whole-check script, which runs it)",
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


def _rerun_by_aggregate(at: int, run: CheckRun, runs: Sequence[tuple[int, CheckRun]]) -> bool:
    """A failed check that a later passing whole-check script of the same tool ran again (``deno task test``
    failed, then ``deno task check``, which runs it, passed)."""
    return run.verdict is Verdict.FAILED and any(
        i > at
        and r.verdict is Verdict.PASSED
        and is_aggregate(r.check.family)
        and r.check.family != run.check.family
        and same_tool(r.check.family, run.check.family)
        for i, r in runs
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
        finals = [
            run
            for i, run in last.values()
            if not _compiled_later(i, run, runs) and not _rerun_by_aggregate(i, run, runs)
        ]
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
