"""What goes into a context and in which order: the relevance ranking picks, the task type orders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.context_plan import plan_context
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import IMPLEMENTER
from ctxbus.core.ranking import rank
from ctxbus.core.task_profiles import GENERAL_PROFILE, SESSION_START_PROFILE, TASK_TYPE_PROFILES
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchHit

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def item(item_id: str, kind: str, **fields: object) -> MemoryItem:
    when = NOW - timedelta(days=30)
    values: dict[str, object] = {"id": item_id, "project": "p", "kind": kind, "content": f"content of {item_id}"}
    values.update({"created_at": when, "updated_at": when, "confidence": 0.7, "importance": 0.5, **fields})
    return MemoryItem.model_validate(values)


def planned(candidates: list[SearchHit], task_type: TaskType, max_items: int) -> list[str]:
    profile = TASK_TYPE_PROFILES[task_type]
    plan = plan_retrieval(IMPLEMENTER, task_type, "add a thing", max_items=max_items, task_profile=profile)
    ranked = rank(candidates, domain=None, now=NOW, max_items=len(candidates))
    hits = plan_context(ranked, plan, profile, now=NOW, half_life_days=90.0)
    return [h.item.id for h in sorted(hits, key=lambda h: -h.score)]  # best first (assembly puts seed 004's head first)


def test_the_task_type_orders_the_context_but_does_not_change_what_is_in_it() -> None:
    """A wanted kind just below the cut does not push a more relevant item of another kind out of the context."""
    candidates = [
        SearchHit(item("why", "pattern"), 0.80),
        SearchHit(item("rule", "pattern"), 0.78),
        SearchHit(item("near", "principle"), 0.75),  # wanted by a refactoring, within 10 % of the two above
    ]
    assert planned(candidates, TaskType.GENERAL, 2) == ["why", "rule"]
    assert planned(candidates, TaskType.REFACTOR, 2) == ["why", "rule"]
    # inside the context, the wanted kind comes first among items about as relevant
    assert planned(candidates, TaskType.REFACTOR, 3) == ["near", "why", "rule"]


def test_the_task_factor_is_applied_last_and_explains_the_score() -> None:
    candidates = [SearchHit(item("warn", "warning"), 0.70), SearchHit(item("rule", "principle"), 0.72)]
    profile = TASK_TYPE_PROFILES[TaskType.BUGFIX]
    plan = plan_retrieval(IMPLEMENTER, TaskType.BUGFIX, "it crashes", task_profile=profile)
    ranked = rank(candidates, domain=None, now=NOW)
    hits = sorted(plan_context(ranked, plan, profile, now=NOW, half_life_days=90.0), key=lambda h: -h.score)
    assert [h.item.id for h in hits] == ["warn", "rule"]
    top = hits[0].breakdown
    agent_total = top["base"] * top["tier_factor"] + top["file_boost"] + top["kind_boost"]
    assert top["ranking_total"] == pytest.approx(agent_total)  # the score the task factor multiplies
    assert hits[0].score == top["total"] == pytest.approx(top["ranking_total"] * top["task_factor"])


def test_near_copies_keep_their_collapsed_ids_through_the_task_factor() -> None:
    candidates = [
        SearchHit(item("a", "warning", cluster_id="a"), 0.80),
        SearchHit(item("a2", "warning", cluster_id="a"), 0.79),
        SearchHit(item("b", "principle"), 0.60),
    ]
    profile = TASK_TYPE_PROFILES[TaskType.BUGFIX]
    plan = plan_retrieval(IMPLEMENTER, TaskType.BUGFIX, "it crashes", max_items=5, task_profile=profile)
    hits = plan_context(rank(candidates, domain=None, now=NOW), plan, profile, now=NOW, half_life_days=90.0)
    assert [(h.item.id, h.collapsed_ids) for h in hits] == [("a", ("a2",)), ("b", ())]
    plain = plan_context(rank(candidates, domain=None, now=NOW), plan, GENERAL_PROFILE, now=NOW, half_life_days=90.0)
    assert [h.item.id for h in plain] == ["a", "b"]
    listed = plan_context(
        rank(candidates, domain=None, now=NOW), plan, profile, now=NOW, half_life_days=90.0, collapse=False
    )
    assert [h.item.id for h in listed] == ["a", "a2", "b"]


def test_a_session_start_places_the_projects_rules_before_past_sessions_that_score_higher() -> None:
    """A session's start has no task: what resembles its generic request says nothing, the project's rules do."""
    candidates = [
        SearchHit(item("past-1", "attempt", importance=0.9), 0.82),
        SearchHit(item("past-2", "attempt"), 0.80),
        SearchHit(item("fix", "learning"), 0.70),
        SearchHit(item("rule", "principle"), 0.35),
        SearchHit(item("never", "warning"), 0.30),
    ]
    plan = plan_retrieval(IMPLEMENTER, None, "Conventions, rules", max_items=5, task_profile=SESSION_START_PROFILE)
    ranked = rank(candidates, domain=None, now=NOW, max_items=len(candidates))
    hits = plan_context(ranked, plan, SESSION_START_PROFILE, now=NOW, half_life_days=90.0)
    assert [h.item.id for h in hits][:2] == ["rule", "never"]  # in assembly order, the rules first
    assert {h.item.id for h in hits} == {c.item.id for c in candidates}  # nothing left out for it


def test_past_attempts_take_at_most_one_of_the_first_three_places() -> None:
    candidates = [
        SearchHit(item("session-a", "attempt"), 0.90),
        SearchHit(item("session-b", "attempt"), 0.88),
        SearchHit(item("session-c", "attempt"), 0.86),
        SearchHit(item("the-fix", "learning"), 0.70),
        SearchHit(item("the-rule", "principle"), 0.60),
    ]
    profile = TASK_TYPE_PROFILES[TaskType.GENERAL]
    plan = plan_retrieval(IMPLEMENTER, TaskType.GENERAL, "add a thing", max_items=5, task_profile=profile)
    hits = plan_context(rank(candidates, domain=None, now=NOW, max_items=5), plan, profile, now=NOW, half_life_days=90)
    order = [h.item.id for h in hits]
    assert sorted(order) == sorted(c.item.id for c in candidates)  # every item stays, only the order changes
    assert [i for i in order[:3] if i.startswith("session")] == ["session-a"] and {"the-fix", "the-rule"} <= set(
        order[:3]
    )
