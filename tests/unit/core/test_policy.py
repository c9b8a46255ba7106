"""Retrieval policy: mode weights normalised, files extracted and boosted, plans, re-scoring explained."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.assembly_order import preserve_order, split_preserved
from ctxbus.core.mentions import extract_mentioned_files, item_mentions
from ctxbus.core.policy import (
    BELOW_MIN_IMPORTANCE,
    CANDIDATE_MULTIPLIER,
    EXCLUDED_KIND,
    FILE_BOOST,
    PREFERRED_KIND_BOOST,
    adjust_weights,
    apply_plan,
    item_tier,
    plan_retrieval,
    rejection_reason,
    tier_budgets,
)
from ctxbus.core.profiles import HELPER, IMPLEMENTER, PLANNER, PROFILES, ContextProfile, Tier, apply_overrides
from ctxbus.core.ranking import RankedHit
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def item(
    item_id: str,
    *,
    kind: MemoryKind = MemoryKind.PRINCIPLE,
    project: str = "p",
    content: str | None = None,
    title: str = "",
    tags: tuple[str, ...] = (),
    reference: str | None = None,
    importance: float = 0.5,
    age_days: float = 0.0,
) -> MemoryItem:
    at = NOW - timedelta(days=age_days)
    return MemoryItem(
        id=item_id,
        project=project,
        kind=kind,
        title=title,
        content=content or f"content of {item_id}",
        tags=tags,
        example_reference=reference,
        importance=importance,
        created_at=at,
        updated_at=at,
    )


def hit(memory: MemoryItem, score: float = 0.5) -> RankedHit:
    return RankedHit(item=memory, score=score, breakdown={"similarity": score, "total": score})


# -- weights ------------------------------------------------------------------------------------


def test_seed_004_implement_adjustment() -> None:
    w = adjust_weights(IMPLEMENTER, TaskType.BUGFIX)
    raw = {Tier.TASK: 0.5 * 1.2, Tier.PROJECT: 0.3 * 0.9, Tier.GLOBAL: 0.2}
    total = sum(raw.values())
    for tier in Tier:
        assert w[tier] == pytest.approx(raw[tier] / total)


def test_seed_004_analysis_adjustment() -> None:
    w = adjust_weights(PLANNER, TaskType.REVIEW)
    raw = {Tier.TASK: 0.2 * 0.9, Tier.PROJECT: 0.5 * 1.2, Tier.GLOBAL: 0.3}
    total = sum(raw.values())
    for tier in Tier:
        assert w[tier] == pytest.approx(raw[tier] / total)


@pytest.mark.parametrize("task_type", [TaskType.GENERAL, None])
def test_general_or_no_task_type_keeps_the_profile_mix(task_type: TaskType | None) -> None:
    assert adjust_weights(IMPLEMENTER, task_type) == pytest.approx(
        {Tier.TASK: 0.5, Tier.PROJECT: 0.3, Tier.GLOBAL: 0.2}
    )


def test_implementation_raises_task_and_analysis_raises_project() -> None:
    base = adjust_weights(IMPLEMENTER, None)
    assert adjust_weights(IMPLEMENTER, TaskType.FEATURE)[Tier.TASK] > base[Tier.TASK]
    assert adjust_weights(IMPLEMENTER, TaskType.EXPLORE)[Tier.PROJECT] > base[Tier.PROJECT]


def test_weights_always_sum_to_one_and_are_never_negative() -> None:
    rng = random.Random(4)
    profiles = list(PROFILES.values())
    for _ in range(300):
        raw = [rng.choice([0.0, rng.uniform(0, 5)]) for _ in range(3)]
        if sum(raw) == 0:
            raw[rng.randrange(3)] = rng.uniform(0.01, 1)
        profile = apply_overrides(
            rng.choice(profiles), {"task_weight": raw[0], "project_weight": raw[1], "global_weight": raw[2]}
        )
        for task_type in [*TaskType, None]:
            w = adjust_weights(profile, task_type)
            assert math.isclose(sum(w.values()), 1.0)
            assert all(v >= 0 for v in w.values())


# -- file extraction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix null pointer exception in src/parser.py line 42", ("src/parser.py",)),
        ("look at src/auth/login.py and a/b.ts:42.", ("src/auth/login.py", "a/b.ts")),
        ("run the Makefile, then docker/Dockerfile", ("Makefile", "docker/Dockerfile")),
        ("update every *.md and src/**/*.py", ("*.md", "src/**/*.py")),
        ("edit ./x.py, ../y/z.rs and `config.json`", ("x.py", "../y/z.rs", "config.json")),
        ("(README.md) README.md, README.md!", ("README.md",)),
        (
            ".gitignore and .pre-commit-config.yaml and deploy/.env",
            (".gitignore", ".pre-commit-config.yaml", "deploy/.env"),
        ),
        ("see https://github.com/o/r/blob/main/src/a.py and www.example.com/b.py", ()),
        ("python 3.11, v1.2.3, numpy==2.4.6, ratio 0.5 and 1.2.3-beta", ()),
        ("e.g. call os.path.join or self.client.send, i.e. done", ()),
        ("the src/auth/ directory and and/or TCP/IP", ()),
        ("mixed: see http://x.io/a.py but fix lib/a.py", ("lib/a.py",)),
        ("", ()),
    ],
)
def test_extract_mentioned_files(text: str, expected: tuple[str, ...]) -> None:
    assert extract_mentioned_files(text) == expected


# -- mention matching ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "files", "expected"),
    [
        (item("a", content="login lives in src/auth/login.py"), ["src/auth/login.py"], True),
        (item("a", content="login lives in src/auth/login.py"), ["login.py"], True),
        (item("a", content="see login.py"), ["/repo/src/auth/login.py"], True),
        (item("a", content="see mylogin.py"), ["login.py"], False),
        (item("a", title="Parser in SRC/Parser.py"), ["src/parser.py"], True),
        (item("a", reference="tests/test_auth.py:12"), ["tests/test_auth.py"], True),
        (item("a", tags=("file:src/db.py",)), ["src/db.py"], True),
        (item("a", content="docs/guide.md explains it"), ["*.md"], True),
        (item("a", content="docs/guide.md explains it"), ["*.py"], False),
        (item("a", content="nothing about files"), ["src/a.py"], False),
        (item("a", content="src/a.py"), [], False),
    ],
)
def test_item_mentions(memory: MemoryItem, files: list[str], expected: bool) -> None:
    assert item_mentions(memory, files) is expected


# -- tiers --------------------------------------------------------------------------------------


def test_item_tier() -> None:
    assert item_tier(item("g", project=GLOBAL_PROJECT, tags=("task:t1",))) is Tier.GLOBAL
    assert item_tier(item("t", tags=("task:t1",)), "T1") is Tier.TASK
    assert item_tier(item("t", tags=("task:t1",)), "t2") is Tier.PROJECT
    assert item_tier(item("e", tags=("task:",))) is Tier.PROJECT
    assert item_tier(item("p", tags=("auth",))) is Tier.PROJECT


def test_a_task_tag_is_project_memory_when_the_request_names_no_task() -> None:
    """Issue 25: without a task id no item is the request's task memory, so none gets the task tier's weight."""
    assert item_tier(item("t", tags=("task:t1",))) is Tier.PROJECT
    assert item_tier(item("t", tags=("task:t1",)), "") is Tier.PROJECT
    plan = plan_retrieval(IMPLEMENTER, TaskType.BUGFIX, "Fix login after password reset")
    notes = hit(item("task-42-notes", title="Task 42 notes", tags=("task:42",)), 0.49)
    login = hit(item("login-reset", content="After a password reset the session token is rotated"), 0.5)
    ranked = apply_plan([notes, login], plan)
    assert [h.item.id for h in ranked] == ["login-reset", "task-42-notes"]
    assert ranked[1].breakdown["tier_project"] == 1.0
    assert ranked[0].breakdown["tier_factor"] == ranked[1].breakdown["tier_factor"]


# -- plans --------------------------------------------------------------------------------------


def test_plan_carries_profile_preferences_and_files() -> None:
    plan = plan_retrieval(
        PLANNER, TaskType.REVIEW, "review src/auth/login.py and docs/*.md", ["src/api.py", "src/auth/login.py"]
    )
    assert plan.profile == "planner"
    assert plan.exclude_kinds == PLANNER.excluded_kinds
    assert plan.include_kinds == frozenset(MemoryKind) - PLANNER.excluded_kinds
    assert plan.preferred_kinds == PLANNER.preferred_kinds
    assert plan.min_importance == 0.5
    assert plan.mentioned_files == ("src/api.py", "src/auth/login.py", "docs/*.md")
    assert (plan.preserve_head, plan.preserve_tail) == (5, 1)
    assert (plan.compression_allowed, plan.compression_ratio) == (True, 0.3)
    assert plan.weights == adjust_weights(PLANNER, TaskType.REVIEW)
    assert plan.max_items == 10 and plan.candidate_limit == 10 * CANDIDATE_MULTIPLIER


def test_plan_item_cap_is_the_smaller_of_request_and_profile() -> None:
    capped = apply_overrides(HELPER, {"max_items": 3})
    assert plan_retrieval(capped, None, "", max_items=8).max_items == 3
    assert plan_retrieval(capped, None, "", max_items=2).max_items == 2
    assert plan_retrieval(HELPER, None, "", max_items=7).max_items == 7
    assert plan_retrieval(capped, None, "").overrides == ("max_items",)
    with pytest.raises(ValueError):
        plan_retrieval(HELPER, None, "", max_items=0)


def test_rejection_reasons() -> None:
    plan = plan_retrieval(PLANNER, None, "")
    assert rejection_reason(plan, item("c", kind=MemoryKind.CODE_REF, importance=0.9)) == EXCLUDED_KIND
    assert rejection_reason(plan, item("d", kind=MemoryKind.DECISION, importance=0.4)) == BELOW_MIN_IMPORTANCE
    assert rejection_reason(plan, item("d", kind=MemoryKind.DECISION, importance=0.5)) is None


# -- re-scoring ---------------------------------------------------------------------------------


def test_apply_plan_explains_every_score() -> None:
    plan = plan_retrieval(IMPLEMENTER, TaskType.BUGFIX, "fix src/parser.py", task_id="T-1")
    hits = [
        hit(item("task", tags=("task:t-1",)), 0.4),
        hit(item("proj", kind=MemoryKind.CODE_REF, content="parser is src/parser.py"), 0.4),
        hit(item("glob", project=GLOBAL_PROJECT), 0.9),
    ]
    out = {h.item.id: h for h in apply_plan(hits, plan)}
    for h in out.values():
        b = h.breakdown
        assert b["total"] == pytest.approx(h.score)
        assert h.score == pytest.approx(b["base"] * b["tier_factor"] + b["file_boost"] + b["kind_boost"])
        assert b["tier_factor"] == pytest.approx(b["tier_weight"] * len(Tier))
        assert b["similarity"] == b["base"]  # the ranking's parts stay
    assert out["task"].breakdown["tier_task"] == 1.0
    assert out["task"].breakdown["tier_weight"] == pytest.approx(plan.weights[Tier.TASK])
    assert out["glob"].breakdown["tier_global"] == 1.0
    proj = out["proj"].breakdown
    assert proj["tier_project"] == 1.0
    assert (proj["file_match"], proj["file_boost"]) == (1.0, FILE_BOOST)
    assert proj["kind_preferred"] == 1.0
    assert proj["kind_boost"] == pytest.approx(PREFERRED_KIND_BOOST * proj["base"] * proj["tier_factor"])
    assert out["task"].breakdown["file_boost"] == 0.0 and out["task"].breakdown["kind_boost"] == 0.0


def test_file_boost_lifts_an_item_about_the_mentioned_file() -> None:
    about = hit(item("b-about", content="the tokenizer is in src/tok.py"), 0.50)
    other = hit(item("a-other", content="unrelated principle"), 0.55)
    plan = plan_retrieval(IMPLEMENTER, None, "why does src/tok.py crash?")
    assert [h.item.id for h in apply_plan([other, about], plan)] == ["b-about", "a-other"]
    no_files = plan_retrieval(IMPLEMENTER, None, "why does it crash?")
    assert [h.item.id for h in apply_plan([other, about], no_files)] == ["a-other", "b-about"]


def test_tier_weights_reorder_equal_hits() -> None:
    task = hit(item("b-task", tags=("task:x",)), 0.5)
    glob = hit(item("a-global", project=GLOBAL_PROJECT), 0.5)
    helper = plan_retrieval(HELPER, None, "", task_id="x")  # task 0.8, global 0.1
    assert [h.item.id for h in apply_plan([glob, task], helper)] == ["b-task", "a-global"]
    global_heavy = apply_overrides(HELPER, {"task_weight": 0.1, "global_weight": 0.8})
    assert [h.item.id for h in apply_plan([glob, task], plan_retrieval(global_heavy, None, "", task_id="x"))] == [
        "a-global",
        "b-task",
    ]


def test_equal_weights_leave_scores_alone() -> None:
    flat = ContextProfile(name="flat", task_weight=1.0, project_weight=1.0, global_weight=1.0)
    out = apply_plan([hit(item("a"), 0.42)], plan_retrieval(flat, None, ""))
    assert out[0].score == pytest.approx(0.42)


def test_apply_plan_filters_sorts_deterministically_and_caps() -> None:
    plan = plan_retrieval(apply_overrides(PLANNER, {"max_items": 2}), None, "")
    hits = [
        hit(item("code", kind=MemoryKind.CODE_REF, importance=0.9), 0.9),
        hit(item("weak", kind=MemoryKind.DECISION, importance=0.1), 0.9),
        hit(item("b", kind=MemoryKind.LEARNING, importance=0.6), 0.3),
        hit(item("a", kind=MemoryKind.LEARNING, importance=0.6), 0.3),
        hit(item("c", kind=MemoryKind.LEARNING, importance=0.6), 0.3),
    ]
    assert [h.item.id for h in apply_plan(hits, plan)] == ["a", "b"]
    assert apply_plan([], plan) == []


# -- budgets and preservation -------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, 1, 2, 3, 10, 999, 4000])
def test_tier_budgets_sum_exactly(budget: int) -> None:
    weights = adjust_weights(IMPLEMENTER, TaskType.BUGFIX)
    shares = tier_budgets(weights, budget)
    assert sum(shares.values()) == budget
    assert all(v >= 0 for v in shares.values())
    assert shares[Tier.TASK] >= shares[Tier.PROJECT] >= shares[Tier.GLOBAL]


def test_tier_budgets_follow_seed_weights() -> None:
    assert tier_budgets(IMPLEMENTER.tier_weights(), 1000) == {Tier.TASK: 500, Tier.PROJECT: 300, Tier.GLOBAL: 200}
    with pytest.raises(ValueError):
        tier_budgets(IMPLEMENTER.tier_weights(), -1)
    with pytest.raises(ValueError):
        tier_budgets({Tier.TASK: 0.0}, 10)


def test_preserve_head_by_importance_and_tail_by_recency() -> None:
    hits = [
        hit(item("r1", importance=0.5, age_days=5), 0.9),
        hit(item("r2", importance=0.9, age_days=9), 0.8),
        hit(item("r3", importance=0.5, age_days=1), 0.7),
        hit(item("r4", importance=0.8, age_days=3), 0.6),
        hit(item("r5", importance=0.5, age_days=0), 0.5),
    ]
    split = split_preserved(hits, 2, 1)
    assert [h.item.id for h in split.head] == ["r2", "r4"]
    assert [h.item.id for h in split.tail] == ["r5"]
    assert [h.item.id for h in split.middle] == ["r1", "r3"]
    assert [h.item.id for h in preserve_order(hits, 2, 1)] == ["r2", "r4", "r5", "r1", "r3"]


def test_preservation_edge_cases() -> None:
    hits = [hit(item(f"i{n}", importance=n / 10, age_days=n)) for n in range(3)]
    assert preserve_order(hits, 0, 0) == hits
    assert sorted(h.item.id for h in preserve_order(hits, 5, 5)) == ["i0", "i1", "i2"]
    assert preserve_order([], 3, 3) == []
    with pytest.raises(ValueError):
        split_preserved(hits, -1, 0)
