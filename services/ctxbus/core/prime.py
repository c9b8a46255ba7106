"""Seed 001's ``prime_context`` response: the assembled context as a JSON document.

Shape (seed 001, plus ids and a little more): ``task_context`` (task type and its confidence,
domain, relevance score, profile, fingerprint), ``principles``, ``patterns``, ``learnings``,
``warnings`` (each with severity and mitigation; failed or partial sessions' learnings as
"Past issue: ..."), ``reference`` (decisions, conventions, code and test references),
``suggested_approach`` (the task-aware steps of ``ctxbus.core.approach``; ``approach_steps`` pairs
each step with the item it quotes, null for the task type's own step) and ``token_count`` (of the
markdown context the same items make, counted by the counter the injector uses). Lists hold exactly
the items the budget admitted, best first (a shortened item with its shortened text); a section
switched off is an empty list. ``budget`` (when given) says how the profile spent the budget: each
tier's weight, share and use, the preserved items, the compressed ones, and every item left out
with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbus.core.approach import Approach
from ctxbus.core.sections import LEARNINGS, PATTERNS, PRINCIPLES, REFERENCE, WARNINGS, mitigation, section_of, severity
from ctxbus.memory.model import MemoryItem, MemoryKind


@dataclass(frozen=True, slots=True)
class TaskContext:
    task_type: str | None
    task_type_confidence: float
    domain: str | None
    profile: str
    fingerprint: str | None


def _principle(item: MemoryItem, relevance: float) -> dict[str, Any]:
    return {
        "id": item.id,
        "content": item.content,
        "conviction": item.confidence,
        "source": item.source,
        "relevance": relevance,
    }


def _pattern(item: MemoryItem, relevance: float) -> dict[str, Any]:
    return {
        "id": item.id,
        "name": item.title or item.id,
        "description": item.content,
        "example_file": item.example_reference,
        "confidence": item.confidence,
        "success_rate": item.success_rate,
        "relevance": relevance,
    }


def _learning(item: MemoryItem, relevance: float) -> dict[str, Any]:
    return {
        "id": item.id,
        "session": item.session_id,
        "task": item.title or item.content,
        "outcome": (item.outcome.value if item.outcome else "unknown"),
        "key_insight": item.key_insight or item.content,
        "lesson_learned": item.lesson_learned,
        "relevance": relevance,
    }


def _warning(item: MemoryItem, relevance: float) -> dict[str, Any]:
    content = f"Past issue: {item.content}" if item.kind is MemoryKind.LEARNING else item.content
    return {
        "id": item.id,
        "content": content,
        "severity": severity(item).value,
        "mitigation": mitigation(item),
        "source": item.session_id or item.source or item.kind.value,
        "relevance": relevance,
    }


def _reference(item: MemoryItem, relevance: float) -> dict[str, Any]:
    return {
        "id": item.id,
        "kind": item.kind.value,
        "title": item.title,
        "content": item.content,
        "reference": item.example_reference,
        "relevance": relevance,
    }


_BUILDERS = {
    PRINCIPLES: _principle,
    PATTERNS: _pattern,
    LEARNINGS: _learning,
    WARNINGS: _warning,
    REFERENCE: _reference,
}


def prime_document(
    task: TaskContext,
    items: Sequence[MemoryItem],
    scores: Mapping[tuple[str, str], float],
    approach: Approach,
    *,
    token_count: int,
    truncated: bool = False,
    empty_reason: str | None = None,
    budget: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document for ``items`` (the injected ones, best first); ``scores`` by (project, id)."""
    doc: dict[str, Any] = {
        "task_context": {
            "task_type": task.task_type,
            "task_type_confidence": round(task.task_type_confidence, 4),
            "domain": task.domain,
            "relevance_score": round(max(scores.values(), default=0.0), 4) if items else 0.0,
            "profile": task.profile,
            "fingerprint": task.fingerprint,
        },
        **{section: [] for section in _BUILDERS},
    }
    for item in items:
        section = section_of(item)
        doc[section].append(_BUILDERS[section](item, round(scores.get((item.project, item.id), 0.0), 4)))
    doc["suggested_approach"] = approach.text
    doc["approach_steps"] = [{"step": s, "item_id": i} for s, i in zip(approach.steps, approach.item_ids, strict=True)]
    doc["token_count"] = token_count
    doc["truncated"] = truncated
    doc["empty_reason"] = empty_reason
    if budget is not None:
        doc["budget"] = dict(budget)
    return doc


def to_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, sort_keys=False)
