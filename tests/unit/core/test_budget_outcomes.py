"""What the gateway and the retriever read from hook input besides the prompt's retrieval (tool output of a
check run, feedback in the next prompt, the final assistant message, meta prompts, the domain), on
adversarial input: a fixed time budget where the work is per character, linear time where it is per line
(a test run's output of 50,000 lines). On 98028a1 a check run's output of blank lines (with carriage
returns or wide spaces) took seconds: ``^\\s*`` re-read every run of blank lines from each line start in it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from ctxbus.core.bounds import QUERY_TERMS_CHARS
from ctxbus.core.check_commands import check_of_command
from ctxbus.core.check_output import read_result
from ctxbus.core.domains import detect_domain
from ctxbus.core.feedback_text import read_assistant_report, read_feedback
from ctxbus.core.hook_evidence import tool_evidence
from ctxbus.core.meta_prompts import recognise
from ctxbus.core.transcript import parse_lines

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SIZE,
    Maker,
    adversarial_makers,
    assert_linear,
    assert_scales_linearly,
    assert_within_budget,
    current_size,
    layout,
    shapes_only,
)

VOCABULARY = ("auth", "database", "api", "frontend", "testing", "kafka", "deploy", "observability")


def check_run_input(output: str) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -q"},
        "tool_response": {"stdout": output, "stderr": output[:1_000], "exit_code": 1},
    }


def read_tool_output(text: str) -> None:
    tool_evidence(check_run_input(text))
    read_result(text, exit_code=0)


def check(make: Maker) -> None:
    text = make(current_size())
    assert_within_budget(recognise, text)
    assert_within_budget(read_feedback, text)
    assert_within_budget(detect_domain, text, [text[:1_000]], VOCABULARY)
    assert_within_budget(read_assistant_report, text)
    assert_linear(read_tool_output, make)  # per line of output (50,000 short lines), and off the event loop
    assert_linear(check_of_command, make)
    assert_linear(lambda t: parse_lines(t.split("\n")), make)


#: what was slow in these readers on 98028a1
EVIDENCE_WORST: dict[str, Maker] = {
    "blank lines with carriage returns": lambda n: layout("\r \n", "repeat", n),
    "blank lines with wide spaces": lambda n: layout("\r\u3000\xa0\t\n", "repeat", n),
    "failures without a time on one line": lambda n: layout("1 failed ", "repeat", n),
    "a run of dots": lambda n: "x" + "." * (n - 1),
    "many environment assignments": lambda n: layout("A=1 ", "repeat", n),
    "a timeout with many options": lambda n: "timeout " + layout("-a ", "repeat", n - 8),
}


@pytest.mark.parametrize("name", sorted({*KNOWN_WORST_MAKERS, *EVIDENCE_WORST}))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda _size: check({**KNOWN_WORST_MAKERS, **EVIDENCE_WORST}[name]))


@SHAPE_SETTINGS
@given(adversarial_makers())
def test_reading_hook_evidence_takes_any_text(make: Maker) -> None:
    with shapes_only():
        check(make)


def test_a_deeply_nested_transcript_line_is_skipped() -> None:
    deep = "[" * SIZE + "]" * SIZE
    assert parse_lines([deep, '{"type": "user"}']) == [{"type": "user"}]


def test_summaries_are_read_as_before_around_blank_lines_and_long_lines() -> None:
    verdict, rule, detail = read_result("\n\n  \n  3 failing\n\n", exit_code=1)
    assert (verdict.value, rule, detail) == ("failed", "failure_summary", "3 failing")
    long_progress = "#" * 5_000 + " ==== 1 failed, 2 passed in 0.31s ===="
    assert read_result(long_progress, exit_code=1)[1] == "failure_summary"
    assert read_result("x" * 2_000 + "\n=== 3 passed in 0.1s ===", exit_code=0)[:2][1] == "pass_summary"
    assert read_result("black" + "." * 10_000 + "Failed", exit_code=1)[1] == "failure_summary"


def test_domain_detection_reads_what_the_keyword_query_reads() -> None:
    filler = "lorem ipsum " * (QUERY_TERMS_CHARS // 12 + 10)
    assert detect_domain("kafka consumer lag " + filler, (), VOCABULARY).domain == "kafka"
    assert detect_domain(filler + " kafka consumer lag", (), VOCABULARY).domain is None


def test_a_long_shell_segment_is_split_on_blanks() -> None:
    check = check_of_command("pytest -q " + "tests/test_x.py::case " * 400)
    assert check is not None and check.kind == "test"
