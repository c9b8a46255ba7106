"""Task-type profiles (seed 001's TASK_TYPE_PROFILES): the translation, the factor, the prefetch, examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.policy import apply_plan, plan_retrieval
from ctxbus.core.profiles import IMPLEMENTER, PLANNER
from ctxbus.core.ranking import RankedHit, rank
from ctxbus.core.task_profiles import (
    CATEGORY_BOOST,
    FEATURE_KIND_BOOST,
    GENERAL_PROFILE,
    KIND_BOOST,
    NO_TASK_PROFILES,
    RECENT_BOOST,
    TASK_TYPE_PROFILES,
    TaskTypeProfile,
    apply_task_profile,
    limit_examples,
    merge_candidates,
    task_profile_for,
)
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome
from ctxbus.ports import SearchHit

NOW = datetime(2026, 6, 1, tzinfo=UTC)
K = MemoryKind


def item(item_id: str, kind: str, *, days_old: float = 30, **fields: object) -> MemoryItem:
    when = NOW - timedelta(days=days_old)
    values: dict[str, object] = {"id": item_id, "project": "p", "kind": kind, "content": f"content of {item_id}"}
    values.update({"created_at": when, "updated_at": when, "confidence": 0.7, **fields})
    return MemoryItem.model_validate(values)


def hit(memory: MemoryItem, score: float) -> RankedHit:
    return RankedHit(memory, score, {"total": score})


def order(hits: list[RankedHit]) -> list[str]:
    return [h.item.id for h in hits]


def apply(hits: list[RankedHit], task_type: TaskType | None) -> list[RankedHit]:
    return apply_task_profile(hits, task_profile_for(task_type), now=NOW, half_life_days=90.0)


def test_every_task_type_has_a_profile_and_general_changes_nothing() -> None:
    assert set(TASK_TYPE_PROFILES) == set(TaskType)
    assert task_profile_for(None) is GENERAL_PROFILE is task_profile_for(TaskType.GENERAL)
    assert GENERAL_PROFILE.neutral and not GENERAL_PROFILE.wanted_kinds and GENERAL_PROFILE.examples is None
    assert all(p is GENERAL_PROFILE for p in NO_TASK_PROFILES.values())
    assert not any(TASK_TYPE_PROFILES[t].neutral for t in TaskType if t is not TaskType.GENERAL)


def test_seed_001s_profiles_translated_to_ctxbus_kinds() -> None:
    wanted = {t: TASK_TYPE_PROFILES[t].wanted_kinds for t in TaskType}
    # feature: measured, not the seed's knowledge and skill (see the module doc): patterns and principles, gently
    assert wanted[TaskType.FEATURE] == {K.PATTERN, K.PRINCIPLE}
    assert TASK_TYPE_PROFILES[TaskType.FEATURE].kind_boost == FEATURE_KIND_BOOST < KIND_BOOST
    assert TASK_TYPE_PROFILES[TaskType.FEATURE].priority_categories == ()
    assert wanted[TaskType.BUGFIX] == {K.LEARNING, K.WARNING, K.ATTEMPT}
    assert wanted[TaskType.REFACTOR] == {K.DECISION, K.CODE_REF, K.PRINCIPLE, K.WARNING}
    assert wanted[TaskType.REVIEW] == {K.PRINCIPLE, K.CONVENTION, K.WARNING}
    assert wanted[TaskType.EXPLORE] == {K.DECISION, K.CODE_REF}  # no warnings, no past sessions
    recent = {t for t in TaskType if TASK_TYPE_PROFILES[t].prioritize_recent}
    assert recent == {TaskType.BUGFIX, TaskType.EXPLORE}
    examples = {t: TASK_TYPE_PROFILES[t].examples for t in TaskType}
    assert examples == {
        TaskType.FEATURE: 3,
        TaskType.REFACTOR: 3,
        TaskType.BUGFIX: 0,
        TaskType.REVIEW: 0,
        TaskType.EXPLORE: 0,
        TaskType.GENERAL: None,
    }
    assert TASK_TYPE_PROFILES[TaskType.REVIEW].priority_categories == ("security", "testing", "standards")


def test_bad_profiles_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown memory types or categories: wisdom"):
        TaskTypeProfile(TaskType.FEATURE, ("wisdom",))
    with pytest.raises(ValueError, match="unknown memory types or categories: vibes"):
        TaskTypeProfile(TaskType.FEATURE, ("skill",), ("vibes",))
    with pytest.raises(ValueError, match="examples must not be negative"):
        TaskTypeProfile(TaskType.FEATURE, examples=-1)
    with pytest.raises(ValueError, match="kind_boost must be between 0 and 1"):
        TaskTypeProfile(TaskType.FEATURE, ("skill",), kind_boost=-0.1)


def test_a_profile_can_leave_out_kinds_of_its_memory_types() -> None:
    skill = TaskTypeProfile(TaskType.FEATURE, ("skill",), include_warnings=False)
    assert skill.wanted_kinds == {K.PATTERN, K.TEST_REF}
    patterns = TaskTypeProfile(TaskType.FEATURE, ("skill",), include_warnings=False, leave_out=frozenset({K.TEST_REF}))
    assert patterns.wanted_kinds == {K.PATTERN} and not patterns.wants(item("t", "test_ref"))
    assert patterns.settings()["kinds"] == ["pattern"] and "kind_boost" not in patterns.settings()  # the default
    assert TASK_TYPE_PROFILES[TaskType.FEATURE].settings()["kind_boost"] == FEATURE_KIND_BOOST


def test_a_gentle_kind_boost_only_breaks_near_ties() -> None:
    close = [hit(item("learning", "learning"), 0.80), hit(item("pattern", "pattern"), 0.79)]
    apart = [hit(item("learning", "learning"), 0.80), hit(item("pattern", "pattern"), 0.70)]
    assert order(apply(close, TaskType.FEATURE)) == ["pattern", "learning"]
    assert order(apply(apart, TaskType.FEATURE)) == ["learning", "pattern"]
    assert apply(close, TaskType.FEATURE)[0].breakdown["task_kind_boost"] == FEATURE_KIND_BOOST


def test_warnings_are_wanted_as_the_profile_says_and_categories_come_from_labels() -> None:
    failed = item("failed", "learning", outcome=Outcome.FAILED)
    worked = item("worked", "learning", outcome=Outcome.SUCCESSFUL)
    belief = item("belief", "principle", tags=("avoid",))
    bugfix, explore = TASK_TYPE_PROFILES[TaskType.BUGFIX], TASK_TYPE_PROFILES[TaskType.EXPLORE]
    assert bugfix.wants(failed) and bugfix.wants(belief) and bugfix.wants(worked)
    feature = TASK_TYPE_PROFILES[TaskType.FEATURE]  # include_warnings off: a warning belief is not promoted
    assert feature.wants(item("p", "principle")) and not feature.wants(belief) and not feature.wants(failed)
    assert not explore.wants(worked) and not explore.wants(failed) and not explore.wants(belief)
    assert explore.wants(item("adr", "decision"))
    review = TASK_TYPE_PROFILES[TaskType.REVIEW]
    assert review.in_category(item("s", "pattern", domains=("security",)))
    assert review.in_category(item("t", "pattern", tags=("tests",)))
    assert not review.in_category(item("d", "pattern", domains=("database",)))


def test_the_same_candidates_rank_differently_under_each_task_type() -> None:
    hits = [
        hit(item("pattern", "pattern"), 0.80),
        hit(item("learning", "learning", outcome=Outcome.SUCCESSFUL), 0.79),
        hit(item("principle", "principle"), 0.78),
        hit(item("convention", "convention"), 0.77),
    ]
    orders = {t: order(apply(hits, t)) for t in TaskType}
    assert orders[TaskType.GENERAL] == ["pattern", "learning", "principle", "convention"]
    assert orders[TaskType.FEATURE][0] == "pattern"
    assert orders[TaskType.BUGFIX][0] == "learning"
    assert orders[TaskType.REFACTOR][0] == "principle"
    assert orders[TaskType.REVIEW][:2] == ["principle", "convention"]
    assert len({tuple(o) for o in orders.values()}) >= 4


def test_the_factor_is_in_the_breakdown_and_explains_the_score() -> None:
    fresh = item("fresh", "warning", days_old=0, tags=("incident",))
    ranked = apply([hit(fresh, 0.5)], TaskType.BUGFIX)[0]
    b = ranked.breakdown
    assert b["task_kind_wanted"] == 1.0 and b["task_kind_boost"] == KIND_BOOST
    assert b["task_category"] == 1.0 and b["task_category_boost"] == CATEGORY_BOOST  # incident: debugging
    assert b["task_recency"] == pytest.approx(1.0) and b["task_recency_boost"] == pytest.approx(RECENT_BOOST)
    assert b["task_factor"] == pytest.approx(1 + KIND_BOOST + CATEGORY_BOOST + RECENT_BOOST)
    assert b["ranking_total"] == 0.5
    assert ranked.score == b["total"] == pytest.approx(0.5 * b["task_factor"])
    untouched = apply([hit(fresh, 0.5)], TaskType.GENERAL)[0]
    assert untouched.score == 0.5 and "task_factor" not in untouched.breakdown


def test_explore_wants_what_describes_the_system_not_past_sessions() -> None:
    """An exploration asks how the system is: a decision or code reference comes before a past session's
    learning of the same relevance, and a recent learning is not lifted over a more relevant pattern."""
    decision = hit(item("b-decision", "decision", days_old=400), 0.70)
    worked = hit(item("a-worked", "learning", days_old=400, outcome=Outcome.SUCCESSFUL), 0.70)
    assert order(apply([worked, decision], TaskType.EXPLORE)) == ["b-decision", "a-worked"]
    pattern = hit(item("pattern", "pattern", days_old=400), 0.90)
    recent = hit(item("recent", "learning", days_old=1, outcome=Outcome.SUCCESSFUL), 0.80)
    assert order(apply([pattern, recent], TaskType.EXPLORE)) == ["pattern", "recent"]
    # bug fixes still want past sessions: the same learning comes first there
    assert order(apply([pattern, recent], TaskType.BUGFIX)) == ["recent", "pattern"]


def test_recent_items_come_first_for_bugfix_not_for_feature() -> None:
    old = hit(item("old", "warning", days_old=400), 0.60)
    new = hit(item("new", "warning", days_old=1), 0.58)
    assert order(apply([old, new], TaskType.BUGFIX)) == ["new", "old"]
    assert order(apply([old, new], TaskType.FEATURE)) == ["old", "new"]


def test_a_wanted_kind_does_not_lift_an_unrelated_item_over_a_relevant_one() -> None:
    relevant = hit(item("relevant", "principle"), 0.80)
    unrelated = hit(item("unrelated", "pattern"), 0.40)
    assert order(apply([relevant, unrelated], TaskType.FEATURE)) == ["relevant", "unrelated"]


def test_prefetched_candidates_merge_once_and_are_marked() -> None:
    a, b, c = (item(i, "learning") for i in "abc")
    main = [SearchHit(a, 0.9), SearchHit(b, 0.8)]
    merged, added = merge_candidates(main, [SearchHit(b, 0.8), SearchHit(c, 0.5)])
    assert [h.item.id for h in merged] == ["a", "b", "c"] and added == {("p", "c")}
    ranked = apply_task_profile(
        [hit(c, 0.5), hit(a, 0.9)], TASK_TYPE_PROFILES[TaskType.BUGFIX], now=NOW, half_life_days=90, prefetched=added
    )
    assert {h.item.id: h.breakdown["task_prefetched"] for h in ranked} == {"a": 0.0, "c": 1.0}


def test_the_prefetch_keeps_within_what_the_agent_profile_allows() -> None:
    feature = TASK_TYPE_PROFILES[TaskType.FEATURE]
    plan = plan_retrieval(IMPLEMENTER, TaskType.FEATURE, "add a thing", task_profile=feature)
    assert plan.prefetch_kinds == feature.wanted_kinds and plan.task_profile is feature
    refactor = TASK_TYPE_PROFILES[TaskType.REFACTOR]
    planner = plan_retrieval(PLANNER, TaskType.REFACTOR, "move a thing", task_profile=refactor)
    assert planner.prefetch_kinds == {K.DECISION, K.PRINCIPLE, K.WARNING}  # the planner excludes code (and tests)
    assert not plan_retrieval(IMPLEMENTER, None, "x").prefetch_kinds


def test_the_task_factor_comes_after_the_agent_profile() -> None:
    """Ranking, then the agent plan, then the task factor (ctxbus.core.context_plan): the factor multiplies the
    agent profile's total and orders what it kept."""
    candidates = [SearchHit(item("warn", "warning"), 0.70), SearchHit(item("rule", "principle"), 0.72)]
    ranked = rank(candidates, domain=None, now=NOW)
    profile = TASK_TYPE_PROFILES[TaskType.BUGFIX]
    plan = plan_retrieval(IMPLEMENTER, TaskType.BUGFIX, "it crashes", task_profile=profile)
    final = apply_task_profile(apply_plan(ranked, plan), profile, now=NOW, half_life_days=90)
    assert order(rank(candidates, domain=None, now=NOW)) == ["rule", "warn"]
    assert order(final) == ["warn", "rule"]
    top = final[0].breakdown
    assert top["ranking_total"] == pytest.approx(
        top["base"] * top["tier_factor"] + top["file_boost"] + top["kind_boost"]
    )
    assert final[0].score == pytest.approx(top["ranking_total"] * top["task_factor"])


def test_examples_are_shown_for_the_best_patterns_only() -> None:
    hits = [hit(item(f"p{i}", "pattern", example_reference=f"src/p{i}.py"), 0.9 - i / 10) for i in range(5)]
    hits.append(hit(item("code", "code_ref", example_reference="src/code.py"), 0.95))
    shown = limit_examples(hits, TASK_TYPE_PROFILES[TaskType.FEATURE])
    assert [h.item.example_reference is not None for h in shown] == [True, True, True, False, False, True]
    assert [h.breakdown.get("example_shown") for h in shown] == [1.0, 1.0, 1.0, 0.0, 0.0, None]
    assert order(shown) == order(hits)
    none = limit_examples(hits, TASK_TYPE_PROFILES[TaskType.REVIEW])
    assert [h.item.example_reference for h in none[:5]] == [None] * 5
    assert none[5].item.example_reference == "src/code.py"  # a code reference is not a pattern's example
    every = limit_examples(hits, GENERAL_PROFILE)
    assert all(h.item.example_reference for h in every)
