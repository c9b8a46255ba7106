"""Sections, warnings' severity and mitigation, the suggested approach and the prime_context document."""

from __future__ import annotations

import json

from ctxbus.core.approach import suggest
from ctxbus.core.prime import TaskContext, prime_document, to_json
from ctxbus.core.sections import LEARNINGS, PATTERNS, PRINCIPLES, REFERENCE, WARNINGS, mitigation, section_of, severity
from ctxbus.memory.model import MemoryItem, Severity


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
    confidence=0.8,
)
FAILED = mem(
    "l-bad",
    "learning",
    "Cached whole user objects in Redis.",
    outcome="failed",
    lesson_learned="Cache ids, not objects.",
    confidence=0.85,
)
PARTIAL = mem("l-part", "learning", "Split the monolith module.", outcome="partial")
WARN = mem(
    "w",
    "warning",
    "Token expiry races async calls.",
    severity="critical",
    mitigation="Check expiry after await.",
    confidence=0.9,
)
BELIEF = mem("b", "principle", "Avoid global mutable state.", tags=("avoid",), confidence=0.9)
PRINCIPLE = mem("pr", "principle", "Validate tokens at API boundaries.", confidence=0.92)
PATTERN = mem(
    "pa",
    "pattern",
    "Refresh tokens in one service.",
    title="Token Refresh",
    example_reference="src/auth/t.py",
    confidence=0.9,
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


def test_the_approach_quotes_what_worked_the_pattern_the_principle_and_the_worst_pitfall_first() -> None:
    approach = suggest([OK, FAILED, PATTERN, PRINCIPLE, WARN])
    assert approach.based_on == 2 and approach.successful == 1
    assert approach.steps[0] == "Start with an integration test (worked before)."
    assert "Token Refresh" in approach.steps[1] and "src/auth/t.py" in approach.steps[1]
    assert approach.steps[2] == "Keep to: Validate tokens at API boundaries."
    assert approach.steps[3].startswith("Watch out (critical)")  # critical before high
    assert "instead: Cache ids, not objects." in approach.steps[4]
    assert approach.item_ids == ("l-ok", "pa", "pr", "w", "l-bad")
    assert approach.text.startswith("Based on 2 similar past tasks (1 successful), recommend: 1) Start with")
    assert suggest([ADR]).text == "" and suggest([]).steps == ()
    assert suggest([OK, FAILED]) == suggest([OK, FAILED])  # deterministic


def test_the_approach_never_leads_with_a_low_confidence_item() -> None:
    unsure = PATTERN.model_copy(update={"id": "pa-unsure", "confidence": 0.5})
    approach = suggest([OK.model_copy(update={"confidence": 0.5}), unsure, PRINCIPLE])
    assert approach.item_ids == ("pr", "l-ok", "pa-unsure")  # the confident principle first, the rest after it
    assert approach.steps[0] == "Keep to: Validate tokens at API boundaries."
    assert suggest([unsure]).steps == () and suggest([unsure]).text == ""  # nothing confident: no approach
    assert suggest([PATTERN.model_copy(update={"confidence": 0.7})]).item_ids == ("pa",)  # the floor is inclusive


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
