"""Every named outcome rule, with cases that fire it and cases that must not."""

from __future__ import annotations

from typing import Any

import pytest

from ctxbus.contract.payloads import Outcome
from ctxbus.core.check_commands import Check
from ctxbus.core.check_output import check_run, exit_code_in, read_result
from ctxbus.core.feedback_text import read_assistant_report, read_feedback
from ctxbus.core.outcome_rules import RULES, AssistantReport, CheckRun, Evidence, Feedback, Verdict, decide

PYTEST_FAIL = """============================= test session starts ==============================
collected 5 items

tests/test_auth.py ..F..                                                  [100%]

=================================== FAILURES ===================================
___________________________ test_reset_revokes_tokens __________________________
E       AssertionError: assert 1 == 0
=========================== short test summary info ============================
FAILED tests/test_auth.py::test_reset_revokes_tokens - AssertionError: assert 1 == 0
========================= 1 failed, 4 passed in 0.21s ==========================
"""
PYTEST_PASS = "tests/test_auth.py .....                                [100%]\n\n5 passed in 0.19s\n"

# rule -> (output, keyword arguments of read_result, expected verdict)
READ_CASES: dict[str, list[tuple[str, dict[str, Any], Verdict]]] = {
    "tool_interrupted": [
        ("tests/test_a.py ....", {"exit_code": 0, "interrupted": True}, Verdict.NONE),
        ("Exit code 137\n[Request interrupted by user for tool use]", {"exit_code": 137}, Verdict.NONE),
    ],
    "command_timed_out": [("Command timed out after 2m 0.0s\ncollecting ...", {"exit_code": 143}, Verdict.NONE)],
    "check_not_run": [
        ("<tool_use_error>Permission denied</tool_use_error>", {"exit_code": None, "tool_error": True}, Verdict.NONE),
        ("Exit code 127\n/bin/bash: line 1: pytest: command not found", {"exit_code": 127}, Verdict.NONE),
        ("/bin/sh: 1: jest: not found", {"exit_code": 1}, Verdict.NONE),
    ],
    "failure_summary": [
        (PYTEST_FAIL, {"exit_code": 1}, Verdict.FAILED),
        (PYTEST_FAIL, {"exit_code": 0}, Verdict.FAILED),  # `pytest | tail`: the pipe's exit code is tail's
        ("Tests:       2 failed, 10 passed, 12 total\nTime: 3.1 s", {"exit_code": 0}, Verdict.FAILED),
        ("      Tests  1 failed | 4 passed (5)", {"exit_code": 1}, Verdict.FAILED),
        ("--- FAIL: TestParse (0.00s)\nFAIL\tgithub.com/acme/web/parse\t0.01s", {"exit_code": 1}, Verdict.FAILED),
        ("test result: FAILED. 3 passed; 1 failed; 0 ignored", {"exit_code": 101}, Verdict.FAILED),
        ("src/api.ts(3,5): error TS2322: Type 'string' is not assignable", {"exit_code": 0}, Verdict.FAILED),
        ("[INFO] BUILD FAILURE\n[INFO] Total time: 4.2 s", {"exit_code": 1}, Verdict.FAILED),
        ("make: *** [Makefile:12: test] Error 1", {"exit_code": 2}, Verdict.FAILED),
        ("main.c:3:5: error: expected ';' before 'return'", {"exit_code": 1}, Verdict.FAILED),
        ("Found 3 errors in 2 files (checked 14 source files)", {"exit_code": 1}, Verdict.FAILED),
        ("FAILED (failures=1)", {"exit_code": 1}, Verdict.FAILED),
        ("12 passed in 1.0s\nFAIL Required test coverage of 90% not reached.", {"exit_code": 1}, Verdict.FAILED),
        ("5 examples, 2 failures", {"exit_code": 1}, Verdict.FAILED),
        ("\x1b[31m1 failed\x1b[0m, \x1b[32m4 passed\x1b[0m in 0.30s", {"exit_code": 0}, Verdict.FAILED),
        # node:test's spec reporter and TAP's tallies (``npm test | tail``: tail's exit code), bun's
        ("\u2139 tests 6\n\u2139 pass 5\n\u2139 fail 1\n\u2139 cancelled 0", {"exit_code": 0}, Verdict.FAILED),
        ("# tests 6\n# pass 5\n# fail 1\n", {"exit_code": 0}, Verdict.FAILED),
        (
            " 12 pass\n 1 fail\n 30 expect() calls\nRan 13 tests across 3 files. [120.00ms]",
            {"exit_code": 0},
            Verdict.FAILED,
        ),
    ],
    "exit_code_nonzero": [
        ("Traceback (most recent call last):\nImportError: cannot import name 'x'", {"exit_code": 2}, Verdict.FAILED),
        ("npm ERR! Test failed.  See above for more details.", {"exit_code": 1}, Verdict.FAILED),
        # a pass line does not outweigh the exit code (an error in teardown fails the run)
        ("12 passed in 1.0s\nException ignored in atexit callback", {"exit_code": 1}, Verdict.FAILED),
    ],
    "pass_summary": [
        (PYTEST_PASS, {"exit_code": 0}, Verdict.PASSED),
        ("Tests:       5 passed, 5 total", {"exit_code": 0}, Verdict.PASSED),
        ("ok  \tgithub.com/acme/web/parse\t0.012s", {"exit_code": 0}, Verdict.PASSED),
        ("test result: ok. 12 passed; 0 failed", {"exit_code": 0}, Verdict.PASSED),
        ("[INFO] BUILD SUCCESS", {"exit_code": 0}, Verdict.PASSED),
        ("All checks passed!", {"exit_code": 0}, Verdict.PASSED),
        ("Success: no issues found in 3 source files", {"exit_code": 0}, Verdict.PASSED),
        # a passing test that prints an error-looking line: the runner's closing summary comes last
        ("error: config file missing (expected)\n...\n5 passed in 0.10s", {"exit_code": 0}, Verdict.PASSED),
        ("=== 2 passed, 1 xfailed in 0.30s ===", {"exit_code": 0}, Verdict.PASSED),
        ("\u2139 tests 6\n\u2139 pass 6\n\u2139 fail 0\n\u2139 cancelled 0", {"exit_code": 0}, Verdict.PASSED),
        ("# tests 6\n# pass 6\n# fail 0\n", {"exit_code": 0}, Verdict.PASSED),
        (
            " 13 pass\n 0 fail\n 30 expect() calls\nRan 13 tests across 3 files. [120.00ms]",
            {"exit_code": 0},
            Verdict.PASSED,
        ),
    ],
    "no_tests_ran": [
        ("collected 0 items\n\nno tests ran in 0.01s", {"exit_code": 5}, Verdict.NONE),
        ("No tests found, exiting with code 0", {"exit_code": 0}, Verdict.NONE),
    ],
    "exit_code_zero": [
        ("", {"exit_code": 0}, Verdict.PASSED),
        ("   Compiling acme v0.1.0\n    Finished dev target(s) in 2.1s", {"exit_code": None}, Verdict.PASSED),
    ],
}

FEEDBACK_CASES: dict[str, list[tuple[str, Outcome]]] = {
    "user_reports_partial": [
        ("not quite - the header is still wrong", Outcome.PARTIAL),
        ("Almost there, the date format is off", Outcome.PARTIAL),
        ("That fixed the crash but the tests fail now", Outcome.PARTIAL),
        ("Works, but the button is misaligned on mobile", Outcome.PARTIAL),
        ("only half of it works: the table filters, the badge doesn't", Outcome.PARTIAL),
    ],
    "user_reports_failure": [
        ("still failing", Outcome.FAILED),
        ("that didn't work", Outcome.FAILED),
        ("It doesn’t compile", Outcome.FAILED),
        ("that broke the login page", Outcome.FAILED),
        ("Now I get a new error: KeyError 'user'", Outcome.FAILED),
        ("the tests are failing", Outcome.FAILED),
        ("No, that's not what I asked for", Outcome.FAILED),
        ("please revert that", Outcome.FAILED),
        ("same error as before", Outcome.FAILED),
        ("Thanks, but it still fails on CI", Outcome.FAILED),
        ("Still getting this on staging:\n\npsycopg2.errors.UndefinedTable", Outcome.FAILED),
        ("hmm, now the page is blank", Outcome.FAILED),
        ("doesn't look right, the labels overlap", Outcome.FAILED),
    ],
    "user_confirms_success": [
        ("that worked, thanks!", Outcome.SUCCESSFUL),
        ("Works now 🎉 next: add pagination", Outcome.SUCCESSFUL),
        ("ok it works! now can you add docs", Outcome.SUCCESSFUL),
        ("LGTM, ship it", Outcome.SUCCESSFUL),
        ("Looks good, but can you also add a docstring?", Outcome.SUCCESSFUL),
        ("yep, all good now. can you commit it?", Outcome.SUCCESSFUL),
        ("much better, thanks", Outcome.SUCCESSFUL),
        ("that's fine, the option does what I wanted", Outcome.SUCCESSFUL),
        ("and after creating a project it says 15. fixed, thanks", Outcome.SUCCESSFUL),
        ("solved! thank you", Outcome.SUCCESSFUL),
    ],
    "user_approves": [
        ("perfect", Outcome.SUCCESSFUL),
        ("Great, now let's add pagination to the list endpoint", Outcome.SUCCESSFUL),
        ("Thanks!", Outcome.SUCCESSFUL),
    ],
}
NOT_FEEDBACK = [
    "does it work now?",
    "is it all good?",
    "make sure it works on Windows too",
    "Add a login page with email and password",
    "Can you check whether that works with Python 3.9?",
    "Add a check so the build fails when lint fails",
    "Do not run the migrations yet",
    "the fixed header overlaps the menu, thanks for looking",
    "I want to see errors in the log with their request id",
    "<task-notification>Background task finished</task-notification>",
    "/clear",
    "[Request interrupted by user]",
]

ASSISTANT_CASES: dict[str, list[tuple[str, Outcome]]] = {
    "assistant_reports_partial": [
        ("I fixed the parser; one test still fails (test_unicode) and needs a decision on NFC.", Outcome.PARTIAL),
        ("The export works for CSV. JSON export is not yet implemented.", Outcome.PARTIAL),
        ("I've migrated 7 of the 9 endpoints; the upload ones need streaming.", Outcome.PARTIAL),
    ],
    "assistant_reports_failure": [
        ("I was unable to reproduce the bug locally.", Outcome.FAILED),
        ("Unfortunately the tests are still failing because the fixture needs a database.", Outcome.FAILED),
        ("I couldn't get the build to pass: the linker cannot find libssl.", Outcome.FAILED),
        ("I wasn't able to change it: the code is in a vendored bundle.", Outcome.FAILED),
    ],
}
NOT_ASSISTANT_REPORTS = [
    "All done! The endpoint is implemented and documented.",
    "There are no remaining issues.",
    "I couldn't find any other callers, so the rename is complete.",
    "I was able to reproduce it and fixed it.",
    "All 9 of the 9 endpoints are migrated.",
]


def run(family: str, verdict: Verdict, key: str, kind: str = "test", toolchain: str | None = None) -> CheckRun:
    return CheckRun(key, Check(family, kind, toolchain), family, verdict, "test", "")


def said(outcome: Outcome, key: str) -> Feedback:
    return Feedback(key, outcome, "user_reports_failure", "still failing")


def admits(outcome: Outcome, key: str) -> AssistantReport:
    return AssistantReport(key, outcome, "assistant_reports_partial", "one test still fails")


P, F, N = Verdict.PASSED, Verdict.FAILED, Verdict.NONE
DECIDE_CASES: dict[str, list[tuple[list[Evidence], Outcome]]] = {
    "user_feedback_decides": [
        ([run("pytest", P, "a"), said(Outcome.FAILED, "b")], Outcome.FAILED),
        ([said(Outcome.SUCCESSFUL, "a")], Outcome.SUCCESSFUL),
    ],
    "checks_fixed": [
        ([run("pytest", F, "a"), run("pytest", P, "b")], Outcome.SUCCESSFUL),
        ([said(Outcome.FAILED, "a"), run("pytest", F, "b"), run("pytest", P, "c")], Outcome.SUCCESSFUL),
        # cargo test compiles what cargo build compiles: its pass fixes the build failure
        (
            [run("cargo build", F, "a", "build", "cargo"), run("cargo test", P, "b", "test", "cargo")],
            Outcome.SUCCESSFUL,
        ),
        # the project's whole-check script runs its tests again: its pass fixes their failure
        ([run("make test", F, "a"), run("make check", P, "b")], Outcome.SUCCESSFUL),
        ([run("npm run lint", F, "a", "lint"), run("npm run ci", P, "b")], Outcome.SUCCESSFUL),
    ],
    "checks_passed": [([run("pytest", P, "a"), run("tsc", P, "b", "typecheck")], Outcome.SUCCESSFUL)],
    "checks_passed_with_reported_gap": [([run("pytest", P, "a"), admits(Outcome.PARTIAL, "b")], Outcome.PARTIAL)],
    "checks_failed": [([run("pytest", P, "a"), run("pytest", F, "b")], Outcome.FAILED)],
    "checks_mixed": [
        ([run("pytest", P, "a"), run("tsc", F, "b", "typecheck")], Outcome.PARTIAL),
        # npm test does not build what the bundler builds: the build failure stands
        ([run("npm run build", F, "a", "build"), run("npm test", P, "b")], Outcome.PARTIAL),
    ],
    "tests_failed": [
        ([run("npm run build", P, "a", "build"), run("npm test", F, "b")], Outcome.FAILED),
        ([run("pytest", F, "a"), run("jest", P, "b")], Outcome.FAILED),
        # another tool's whole-check script says nothing about this one's tests
        ([run("pytest", F, "a"), run("make check", P, "b")], Outcome.FAILED),
    ],
    "assistant_report_decides": [([run("pytest", N, "a"), admits(Outcome.FAILED, "b")], Outcome.FAILED)],
    "no_evidence": [([], Outcome.UNKNOWN), ([run("pytest", N, "a")], Outcome.UNKNOWN)],
}


def test_every_rule_is_tested_here() -> None:
    tested = set(READ_CASES) | set(FEEDBACK_CASES) | set(ASSISTANT_CASES) | set(DECIDE_CASES)
    assert tested == set(RULES)
    assert all(rule.reads and rule.implies for rule in RULES.values())


@pytest.mark.parametrize(
    ("rule", "output", "kwargs", "verdict"),
    [(rule, *case) for rule, cases in READ_CASES.items() for case in cases],
)
def test_reading_a_check_result(rule: str, output: str, kwargs: dict[str, Any], verdict: Verdict) -> None:
    got_verdict, got_rule, detail = read_result(output, **kwargs)
    assert (got_rule, got_verdict) == (rule, verdict)
    assert detail and len(detail) <= 160


def test_the_summary_line_is_the_detail() -> None:
    assert read_result(PYTEST_FAIL, exit_code=1)[2] == "1 failed, 4 passed in 0.21s"


PLAYWRIGHT_TALLY = (
    "Running 2 tests using 1 worker\n\n"
    "  \u2718  1 [chromium] \u203a e2e/signup.spec.ts:21:1 \u203a volunteer can sign up (2.4s)\n"
    "  \u2713  2 [chromium] \u203a e2e/shifts.spec.ts:4:1 \u203a lists shifts (1.1s)\n\n"
    "  1) [chromium] \u203a e2e/signup.spec.ts:21:1 \u203a volunteer can sign up\n\n"
    "    Error: locator.click: Error: strict mode violation\n\n"
    "  1 failed\n    [chromium] \u203a e2e/signup.spec.ts:21:1 \u203a volunteer can sign up \u2500\u2500\u2500\n"
    "  1 flaky\n    [chromium] \u203a e2e/cancel.spec.ts:3:1 \u203a cancels \u2500\u2500\u2500\n"
    "  1 passed (14.9s)\n"
)


def test_a_playwright_tally_that_lists_failed_tests_before_the_passed_count_is_a_failure() -> None:
    """Playwright ends on ``N passed`` after ``N failed`` and its list: one tally, and it failed (piped through
    ``tail``, the exit code says nothing)."""
    assert read_result(PLAYWRIGHT_TALLY, exit_code=0)[:2] == (Verdict.FAILED, "failure_summary")
    passing = PLAYWRIGHT_TALLY.split("  1 failed", maxsplit=1)[0] + "  2 passed (9.1s)\n"
    assert read_result(passing, exit_code=0)[:2] == (Verdict.PASSED, "pass_summary")


def test_a_run_that_passes_after_an_earlier_failing_run_in_the_same_output_passed() -> None:
    earlier = "  1 failing\n\n  1) api\n     Error: boom\n"
    rerun = "\n".join(f"  ok {i} - case {i}" for i in range(80)) + "\n\n  81 passing (2s)\n"
    assert read_result(earlier + rerun, exit_code=0)[:2] == (Verdict.PASSED, "pass_summary")


@pytest.mark.parametrize(
    ("rule", "prompt", "outcome"), [(rule, *case) for rule, cases in FEEDBACK_CASES.items() for case in cases]
)
def test_feedback(rule: str, prompt: str, outcome: Outcome) -> None:
    read = read_feedback(prompt)
    assert read is not None and read[:2] == (outcome, rule)


@pytest.mark.parametrize("prompt", NOT_FEEDBACK)
def test_not_feedback(prompt: str) -> None:
    assert read_feedback(prompt) is None


def test_only_the_head_of_a_prompt_is_read() -> None:
    assert read_feedback("Add a README section. " + "x " * 200 + " still failing") is None


@pytest.mark.parametrize(
    ("rule", "text", "outcome"), [(rule, *case) for rule, cases in ASSISTANT_CASES.items() for case in cases]
)
def test_assistant_reports(rule: str, text: str, outcome: Outcome) -> None:
    read = read_assistant_report(text)
    assert read is not None and read[:2] == (outcome, rule)


@pytest.mark.parametrize("text", NOT_ASSISTANT_REPORTS)
def test_claims_and_neutral_messages_are_not_reports(text: str) -> None:
    assert read_assistant_report(text) is None


@pytest.mark.parametrize(
    ("rule", "evidence", "outcome"), [(rule, *case) for rule, cases in DECIDE_CASES.items() for case in cases]
)
def test_decide(rule: str, evidence: list[Evidence], outcome: Outcome) -> None:
    decision = decide(evidence)
    assert (decision.rules[0], decision.outcome) == (rule, outcome)
    assert decision.keys == tuple(e.key for e in evidence)
    assert decision.notes.startswith(f"{rule}: ") and len(decision.notes) <= 2_000


def test_the_notes_name_the_reading_rules_and_the_commands() -> None:
    first = check_run("t1", "pytest -q 2>&1 | tail -20", PYTEST_FAIL, exit_code=0)
    second = check_run("t2", "pytest -q", PYTEST_PASS, exit_code=0)
    assert first is not None and second is not None
    decision = decide([first, second])
    assert decision.rules == ("checks_fixed", "pass_summary")
    assert "`pytest -q 2>&1 | tail -20` failed (failure_summary: 1 failed, 4 passed in 0.21s)" in decision.notes


def test_commands_that_are_not_checks_are_never_evidence() -> None:
    assert check_run("t", "grep -rn FAILED logs/", "logs/a.log: 3 failed, 1 passed in 2.0s", exit_code=0) is None
    assert check_run("t", "cat test-output.txt", PYTEST_FAIL, exit_code=0) is None


def test_exit_code_in_a_failed_result() -> None:
    assert exit_code_in("Exit code 1\nsome output") == 1
    assert exit_code_in("Error: Exit code 2\n") == 2
    assert exit_code_in("no code here") is None
