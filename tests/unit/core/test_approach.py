"""The suggested approach: task-aware steps from the injected material, nothing without material."""

from __future__ import annotations

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.approach import FRAMING, MAX_STEPS, MIN_APPROACH_CONFIDENCE, MIN_STEPS, NO_APPROACH, suggest
from ctxbus.memory.model import MemoryItem


def mem(item_id: str, kind: str, content: str = "", **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {"id": item_id, "project": "p", "kind": kind, "content": content or f"{item_id} content.", **fields}
    )


OK = mem(
    "l-ok",
    "learning",
    "Added OAuth2 login.",
    outcome="successful",
    key_insight="Start with an integration test.",
    session_id="s1",
)
FAILED = mem(
    "l-bad",
    "learning",
    "Cached whole user objects in Redis.",
    outcome="failed",
    lesson_learned="Cache ids, not objects; load roles fresh.",
    session_id="s2",
)
UNKNOWN = mem("l-unk", "learning", "Tried a new retry policy.", session_id="s3")
WARN = mem(
    "w",
    "warning",
    "Token expiry races async calls.",
    title="Token expiry race",
    severity="critical",
    mitigation="Check expiry after every await.",
)
PRINCIPLE = mem("pr", "principle", "Validate tokens at API boundaries. Always.", confidence=0.92)
PATTERN = mem(
    "pa",
    "pattern",
    "Refresh tokens in one service.",
    title="Token Refresh",
    example_reference="src/auth/t.py",
    confidence=0.9,
)
ADR = mem("adr", "decision", "We use Postgres for sessions.", title="Sessions in Postgres")
ALL = [OK, FAILED, PATTERN, PRINCIPLE, WARN, ADR]


def test_a_bugfix_reproduces_first_then_applies_the_past_fix_and_avoids_the_worst_pitfall() -> None:
    approach = suggest(ALL, TaskType.BUGFIX)
    assert approach.steps[0] == FRAMING[(TaskType.BUGFIX, "open")] and approach.item_ids[0] is None
    assert approach.steps[1] == "Start from the fix that worked before: Start with an integration test."
    assert approach.steps[2] == (
        "Avoid the known pitfall (critical): Token expiry race. Instead: Check expiry after every await."
    )
    assert approach.item_ids == (None, "l-ok", "w", "pa", "pr")


def test_a_feature_builds_on_the_pattern_and_ends_with_tests() -> None:
    approach = suggest(ALL, TaskType.FEATURE)
    assert approach.steps[0] == "Build on the Token Refresh pattern (src/auth/t.py)."
    assert approach.steps[-1] == FRAMING[(TaskType.FEATURE, "close")]
    assert approach.item_ids == ("pa", "l-ok", "pr", "w", None)


def test_a_refactor_secures_a_safety_net_then_the_principle_and_the_pattern() -> None:
    approach = suggest(ALL, TaskType.REFACTOR)
    assert approach.steps[0] == FRAMING[(TaskType.REFACTOR, "open")]
    assert approach.steps[1] == "Keep to the principle: Validate tokens at API boundaries."
    assert approach.steps[2] == "Move the code towards the Token Refresh pattern (src/auth/t.py)."
    assert approach.item_ids == (None, "pr", "pa", "w", "l-ok")


def test_a_review_checks_principles_and_pitfalls() -> None:
    approach = suggest(ALL, TaskType.REVIEW)
    assert approach.steps[0] == "Check that the change keeps to the principle: Validate tokens at API boundaries."
    assert approach.steps[1] == (
        "Check for the known pitfall (critical): Token expiry race. The fix: Check expiry after every await."
    )
    assert approach.item_ids[:2] == ("pr", "w") and None not in approach.item_ids


def test_an_exploration_reads_decisions_and_conventions_first() -> None:
    approach = suggest(ALL, TaskType.EXPLORE)
    assert approach.steps[0] == "Read the decision first: Sessions in Postgres."
    assert approach.item_ids == ("adr", "pa", "pr", "l-ok", "w")


@pytest.mark.parametrize("task_type", [TaskType.GENERAL, None])
def test_a_general_task_gets_the_material_in_a_neutral_order(task_type: TaskType | None) -> None:
    approach = suggest(ALL, task_type)
    assert approach.item_ids == ("l-ok", "pa", "pr", "w")
    assert approach.steps[0] == "Reuse what worked before: Start with an integration test."
    assert approach.steps[1] == "Follow the Token Refresh pattern (src/auth/t.py)."


@pytest.mark.parametrize("task_type", [*TaskType, None])
def test_full_material_gives_three_to_five_steps_for_every_task_type(task_type: TaskType | None) -> None:
    approach = suggest(ALL, task_type)
    assert MIN_STEPS <= len(approach.steps) <= MAX_STEPS
    assert len(approach.item_ids) == len(approach.steps) and len(set(approach.steps)) == len(approach.steps)
    assert suggest(ALL, task_type) == approach  # deterministic
    lines = approach.text.splitlines()
    assert lines[1:] == [f"{n}. {step}" for n, step in enumerate(approach.steps, start=1)]


@pytest.mark.parametrize("task_type", [*TaskType, None])
def test_no_material_no_approach(task_type: TaskType | None) -> None:
    assert suggest([], task_type) == NO_APPROACH and NO_APPROACH.text == ""
    # a learning of unknown outcome is no recommendation; the task type's own step never stands alone
    assert suggest([UNKNOWN], task_type).text == ""


def test_the_header_counts_past_tasks_by_session_and_never_says_zero_successful() -> None:
    assert suggest([OK, FAILED, PRINCIPLE]).text.startswith(
        "Based on 2 similar past tasks (1 successful), recommend:\n1. "
    )
    only_failed = suggest([FAILED, PRINCIPLE]).text
    assert only_failed.startswith("Based on 1 similar past task, recommend:\n1. ")
    assert "successful" not in only_failed.splitlines()[0]
    same_session = FAILED.model_copy(update={"id": "l-bad-2", "session_id": "s2"})
    assert suggest([FAILED, same_session, PRINCIPLE]).based_on == 1
    assert suggest([PRINCIPLE, WARN]).text.startswith("Recommended steps:\n1. ")


def test_never_leads_with_a_low_confidence_pattern_or_principle() -> None:
    weak_pattern = PATTERN.model_copy(update={"id": "weak", "confidence": MIN_APPROACH_CONFIDENCE - 0.2})
    weak_principle = PRINCIPLE.model_copy(update={"id": "weak-pr", "confidence": 0.5})
    for task_type in [*TaskType, None]:
        approach = suggest([weak_pattern, weak_principle, WARN], task_type)
        assert "weak" not in approach.item_ids and "weak-pr" not in approach.item_ids
        first = next(i for i in approach.item_ids if i is not None)
        assert first == "w"
        assert suggest([weak_pattern, weak_principle], task_type).text == ""
    at_threshold = PATTERN.model_copy(update={"confidence": MIN_APPROACH_CONFIDENCE})
    assert suggest([at_threshold]).item_ids == ("pa",)


def test_a_second_item_of_a_kind_fills_up_to_three_steps() -> None:
    other = OK.model_copy(update={"id": "l-ok-2", "session_id": "s9", "key_insight": "Pin the client version."})
    approach = suggest([OK, other])
    assert approach.item_ids == ("l-ok", "l-ok-2")  # the material runs out: fewer steps, nothing invented
    assert suggest([OK, other, WARN, PRINCIPLE]).item_ids == ("l-ok", "pr", "w")


def test_a_pattern_without_a_title_is_quoted() -> None:
    untitled = PATTERN.model_copy(update={"title": "", "example_reference": None})
    assert suggest([untitled]).steps == ('Follow the pattern "Refresh tokens in one service".',)
