"""Sections, warnings' severity and mitigation, the suggested approach and the prime_context document."""

from __future__ import annotations

import json

from ctxbus.contract.payloads import TaskType
from ctxbus.core.approach import suggest
from ctxbus.core.prime import TaskContext, prime_document, to_json
from ctxbus.core.sections import LEARNINGS, PATTERNS, PRINCIPLES, REFERENCE, WARNINGS, mitigation, section_of, severity
from ctxbus.memory.model import MemoryItem, Severity


def mem(item_id: str, kind: str, content: str = "", **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {"id": item_id, "project": "p", "kind": kind, "content": content or f"{item_id} content.", **fields}
    )


OK = mem("l-ok", "learning", "Added OAuth2 login.", outcome="successful", key_insight="Start with an integration test.")
FAILED = mem(
    "l-bad",
    "learning",
    "Cached whole user objects in Redis.",
    outcome="failed",
    lesson_learned="Cache ids, not objects.",
)
PARTIAL = mem("l-part", "learning", "Split the monolith module.", outcome="partial")
WARN = mem(
    "w", "warning", "Token expiry races async calls.", severity="critical", mitigation="Check expiry after await."
)
BELIEF = mem("b", "principle", "Avoid global mutable state.", tags=("avoid",), confidence=0.9)
PRINCIPLE = mem("pr", "principle", "Validate tokens at API boundaries.", confidence=0.92)
PATTERN = mem(
    "pa", "pattern", "Refresh tokens in one service.", title="Token Refresh", example_reference="src/auth/t.py"
)
ADR = mem("adr", "decision", "We use Postgres.")


def test_sections_put_failed_partial_and_warning_beliefs_under_warnings() -> None:
    assert [section_of(i) for i in (OK, FAILED, PARTIAL, WARN, BELIEF, PRINCIPLE, PATTERN, ADR)] == [
        LEARNINGS,
        WARNINGS,
        WARNINGS,
        WARNINGS,
        WARNINGS,
        PRINCIPLES,
        PATTERNS,
        REFERENCE,
    ]


def test_severity_is_own_or_derived_and_mitigation_falls_back_to_the_lesson() -> None:
    assert severity(WARN) is Severity.CRITICAL
    assert severity(FAILED) is Severity.HIGH and severity(PARTIAL) is Severity.MEDIUM
    assert severity(BELIEF) is Severity.HIGH  # conviction 0.9 > 0.8
    assert severity(BELIEF.model_copy(update={"confidence": 0.5})) is Severity.MEDIUM
    assert mitigation(FAILED) == "Cache ids, not objects." and mitigation(WARN) == "Check expiry after await."
    assert mitigation(PARTIAL) is None


def test_the_prime_document_has_seed_001s_shape() -> None:
    items = [PRINCIPLE, PATTERN, OK, FAILED, ADR]
    scores = {("p", i.id): 0.5 + n / 10 for n, i in enumerate(items)}
    doc = prime_document(
        TaskContext("feature", 0.9, "auth", "implementer", "fp"), items, scores, suggest(items), token_count=123
    )
    assert list(doc)[:7] == [
        "task_context",
        "principles",
        "patterns",
        "learnings",
        "warnings",
        "reference",
        "suggested_approach",
    ]
    assert doc["task_context"] == {
        "task_type": "feature",
        "task_type_confidence": 0.9,
        "domain": "auth",
        "relevance_score": 0.9,
        "profile": "implementer",
        "fingerprint": "fp",
    }
    assert doc["principles"] == [
        {"id": "pr", "content": PRINCIPLE.content, "conviction": 0.92, "source": "", "relevance": 0.5}
    ]
    assert doc["patterns"][0]["name"] == "Token Refresh" and doc["patterns"][0]["example_file"] == "src/auth/t.py"
    assert doc["learnings"][0]["outcome"] == "successful"
    assert doc["learnings"][0]["key_insight"] == "Start with an integration test."
    assert doc["warnings"] == [
        {
            "id": "l-bad",
            "content": "Past issue: Cached whole user objects in Redis.",
            "severity": "high",
            "mitigation": "Cache ids, not objects.",
            "source": "learning",
            "relevance": 0.8,
        }
    ]
    assert doc["reference"][0]["kind"] == "decision"
    assert doc["suggested_approach"] == suggest(items).text and doc["token_count"] == 123
    assert json.loads(to_json(doc)) == doc


def test_the_prime_document_carries_the_task_aware_approach_and_the_budget_report() -> None:
    items = [PRINCIPLE, WARN]
    approach = suggest(items, TaskType.BUGFIX)
    budget = {"profile": "implementer", "compressed": ["w"], "left_out": [{"id": "x", "reason": "tier_budget"}]}
    doc = prime_document(
        TaskContext("bugfix", 1.0, None, "implementer", None), items, {}, approach, token_count=9, budget=budget
    )
    assert doc["suggested_approach"] == approach.text and doc["budget"] == budget
    assert doc["approach_steps"][0] == {"step": approach.steps[0], "item_id": None}  # the task type's own step
    assert [s["item_id"] for s in doc["approach_steps"][1:]] == ["w", "pr"]
    assert "budget" not in prime_document(TaskContext(None, 0.0, None, "helper", None), [], {}, approach, token_count=0)
