"""Hook inputs -> evidence: a check run from a shell tool's result (its exit code wherever the input puts it),
nothing from other tools or empty commands; a prompt is feedback only when it says so."""

from __future__ import annotations

from typing import Any

from ctxbus.core.hook_evidence import prompt_evidence, prompt_key, tool_evidence
from ctxbus.core.outcome_rules import Outcome, Verdict


def bash(event: str = "PostToolUse", command: str = "pytest -q", **kw: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "tool_name": "Bash", "tool_input": {"command": command}, **kw}


def test_other_tools_and_empty_commands_are_no_evidence() -> None:
    assert tool_evidence({**bash(), "tool_name": "Edit"}) is None
    assert tool_evidence(bash(command="   ")) is None
    assert tool_evidence({**bash(), "tool_input": "pytest"}) is None  # not a mapping: no command
    assert tool_evidence({**bash(), "hook_event_name": "Stop"}) is None


def test_a_failed_tool_takes_its_exit_code_from_the_error_text() -> None:
    run = tool_evidence(bash("PostToolUseFailure", error="Command failed with exit code 1", tool_use_id="t1"))
    assert run is not None and run.key == "t1" and run.verdict is Verdict.FAILED
    generated = tool_evidence(bash("PostToolUseFailure", error_message="pytest: status code: 2"))
    assert generated is not None and generated.key.startswith("hook-")


def test_a_result_mapping_gives_its_exit_code_and_a_plain_text_result_passes() -> None:
    failed = tool_evidence(bash(tool_response={"stdout": "1 failed, 3 passed", "stderr": "", "returncode": 1}))
    assert failed is not None and failed.verdict is Verdict.FAILED
    interrupted = tool_evidence(bash(tool_response={"stdout": "", "interrupted": True}))
    assert interrupted is not None and interrupted.verdict is Verdict.NONE
    text = tool_evidence(bash(tool_response="5 passed in 0.3s"))
    assert text is not None and text.verdict is Verdict.PASSED


def test_a_prompt_is_feedback_only_when_it_says_so() -> None:
    key = prompt_key("that broke the login again", 3)
    assert key == prompt_key("that broke the login again", 3) != prompt_key("that broke the login again", 4)
    assert prompt_evidence(None, key) is None
    assert prompt_evidence("now add a logout button", key) is None
    feedback = prompt_evidence("Almost there, the date format is off", key)
    assert feedback is not None and feedback.key == key and feedback.outcome is Outcome.PARTIAL
