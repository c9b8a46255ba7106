"""Claude Code transcripts -> outcome evidence."""

from __future__ import annotations

import json
from typing import Any

from ctxbus.contract.payloads import Outcome
from ctxbus.core.outcome_rules import AssistantReport, CheckRun, Feedback, Verdict, decide
from ctxbus.core.transcript import evidence_in, last_turn_start, parse_lines, prompt_of


def user(text: str, **extra: Any) -> dict[str, Any]:
    message = {"role": "user", "content": text}
    return {"type": "user", "uuid": f"u-{abs(hash(text)) % 10_000}", "message": message, **extra}


def say(text: str, **extra: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    return {"type": "assistant", "uuid": f"a-{abs(hash(text)) % 10_000}", "message": {"content": content}, **extra}


def bash(tool_id: str, command: str, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
    return {"type": "assistant", "message": {"content": [block]}, **extra}


def ok(tool_id: str, stdout: str, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": stdout, "is_error": False}
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    return {"type": "user", "message": {"role": "user", "content": [block]}, "toolUseResult": response, **extra}


def error(tool_id: str, text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": True}
    return {"type": "user", "message": {"role": "user", "content": [block]}, "toolUseResult": f"Error: {text}"}


def test_a_failure_fixed_by_a_later_pass() -> None:
    entries = [
        user("Fix the password reset test"),
        bash("t1", "pytest -q"),
        error("t1", "Exit code 1\n.F..\n1 failed, 3 passed in 0.20s"),
        bash("t2", "pytest -q 2>&1 | tail -3"),
        ok("t2", "....\n4 passed in 0.18s"),
        say("Fixed: the reset now revokes the refresh tokens."),
    ]
    evidence = evidence_in(entries)
    assert [(e.key, e.verdict) for e in evidence if isinstance(e, CheckRun)] == [
        ("t1", Verdict.FAILED),
        ("t2", Verdict.PASSED),
    ]
    assert decide(evidence).rules[0] == "checks_fixed"


def test_tool_errors_interruptions_and_other_tools() -> None:
    entries = [
        bash("t1", "pytest"),
        error("t1", "<tool_use_error>The user doesn't want to proceed with this tool use.</tool_use_error>"),
        bash("t2", "npm test"),
        ok("t2", "", toolUseResult={"stdout": "", "stderr": "", "interrupted": True}),
        bash("t3", "grep -rn FAILED ."),
        ok("t3", "notes.md: 3 failed, 1 passed in 2.0s"),
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t4", "name": "Read", "input": {}}]}},
    ]
    runs = [e for e in evidence_in(entries) if isinstance(e, CheckRun)]
    assert [(r.key, r.verdict, r.rule) for r in runs] == [
        ("t1", Verdict.NONE, "check_not_run"),
        ("t2", Verdict.NONE, "tool_interrupted"),
    ]
    assert decide(evidence_in(entries)).outcome is Outcome.UNKNOWN


def test_the_final_assistant_message_is_read_and_ordered_after_the_checks() -> None:
    entries = [
        bash("t1", "pytest"),
        ok("t1", "5 passed in 0.1s"),
        say("Let me also check the e2e suite."),
        say("The unit tests pass, but I was unable to run the e2e tests: no browser here."),
    ]
    evidence = evidence_in(entries)
    assert isinstance(evidence[-1], AssistantReport) and evidence[-1].outcome is Outcome.FAILED
    assert decide(evidence).outcome is Outcome.PARTIAL


def test_prompts_are_feedback_only_after_an_answer_and_only_when_asked() -> None:
    entries = [user("still failing"), say("Looking."), user("still failing")]
    assert evidence_in(entries) == []
    feedback = evidence_in(entries, prompts_as_feedback=True)
    assert len(feedback) == 1 and isinstance(feedback[0], Feedback)


def test_meta_entries_subagents_and_prompts() -> None:
    assert prompt_of(user("<command-name>/clear</command-name>")) is None
    assert prompt_of(user("hi", isMeta=True)) is None
    assert prompt_of(user("do it", isSidechain=True)) is None
    assert prompt_of(ok("t", "x")) is None
    blocks = {"type": "user", "message": {"content": [{"type": "text", "text": "Fix it"}]}}
    assert prompt_of(blocks) == "Fix it"
    # a subagent's test run is the session's work too
    sub = [bash("t1", "pytest", isSidechain=True), error("t1", "Exit code 1\n1 failed in 0.1s")]
    assert decide(evidence_in(sub)).outcome is Outcome.FAILED


def test_last_turn_and_torn_lines() -> None:
    lines = [json.dumps(user("first")), json.dumps(say("ok")), json.dumps(user("second")), '{"type": "assist', "[1]"]
    entries = parse_lines(lines)
    assert len(entries) == 3 and last_turn_start(entries) == 3
    assert last_turn_start([say("no prompt")]) == 0
