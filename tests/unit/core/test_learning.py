"""Learning's rule: order-free counts, bounded gradual values, and the ranking that uses them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.core.learning import (
    MAX_CONVICTION,
    MAX_SHIFT,
    MIN_CONVICTION,
    PRIOR_WEIGHT,
    InjectionFact,
    OutcomeFact,
    feedback_counts,
    learned_conviction,
    learned_success_rate,
    learned_usage,
    with_learning,
)
from ctxbus.core.ranking import RankingWeights, score_hit
from ctxbus.memory.model import Feedback, MemoryItem
from ctxbus.ports import SearchHit

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def inj(eid: str, session: str, items: tuple[str, ...], at: int = 0, task: str | None = None) -> InjectionFact:
    return InjectionFact(eid, "p", session, task, T0 + timedelta(seconds=at), tuple(("p", i) for i in items))


def out(
    eid: str, session: str, outcome: str, at: int = 10, scope: str = "session", task: str | None = None
) -> OutcomeFact:
    return OutcomeFact(eid, "p", session, task, scope, outcome, T0 + timedelta(seconds=at))


def test_counts_follow_the_rule_in_any_order_and_once_per_event() -> None:
    injections = [
        inj("i1", "s1", ("a", "b")),
        inj("i2", "s1", ("a",)),
        inj("i3", "s2", ("b",)),
        inj("late", "s1", ("c",), at=99),
    ]
    outcomes = [out("o1", "s1", "failed"), out("o2", "s2", "successful"), out("o3", "s1", "partial")]
    expected = {
        ("p", "a"): Feedback(
            uses=2, successes=0, partials=1, failures=1
        ),  # injected twice into s1: counted per outcome
        ("p", "b"): Feedback(uses=3, successes=1, partials=1, failures=1),
    }  # "c" was injected after s1's outcomes: they do not count for it
    assert feedback_counts(injections, outcomes) == expected
    rng = random.Random(3)
    for _ in range(5):
        i, o = injections[:], outcomes + outcomes  # duplicates count once
        rng.shuffle(i)
        rng.shuffle(o)
        assert feedback_counts(i, o) == expected


def test_task_outcomes_count_for_the_tasks_injections_in_any_session() -> None:
    injections = [inj("i1", "s1", ("a",), task="t"), inj("i2", "s2", ("b",), task="t"), inj("i3", "s3", ("c",))]
    counts = feedback_counts(injections, [out("o", "whatever", "successful", scope="task", task="t")])
    assert set(counts) == {("p", "a"), ("p", "b")}


def item(confidence: float = 0.7, success_rate: float | None = None, **fb: int) -> MemoryItem:
    return MemoryItem(
        id="x",
        project="p",
        kind="pattern",
        content="c",
        confidence=confidence,
        success_rate=success_rate,  # type: ignore[arg-type]
        usage_count=5,
        feedback=Feedback(**fb),
    )


def test_learned_values_are_gradual_bounded_and_neutral_without_outcomes() -> None:
    plain = item()
    assert with_learning(plain) is plain and learned_success_rate(plain) is None
    one_fail = item(uses=1, failures=1)
    assert learned_conviction(one_fail) == pytest.approx(0.7 - MAX_SHIFT / (1 + PRIOR_WEIGHT))
    many_fails = item(uses=1000, failures=1000)
    assert learned_conviction(many_fails) == pytest.approx(max(MIN_CONVICTION, 0.7 - MAX_SHIFT * 1000 / 1004))
    assert learned_conviction(item(0.95, uses=1000, successes=1000)) == MAX_CONVICTION
    assert learned_success_rate(item(success_rate=0.9, uses=2, successes=2)) == pytest.approx((2 + 0.9 * 4) / 6)
    assert learned_success_rate(item(uses=2, partials=2)) == pytest.approx((1 + 0.5 * 4) / 6)
    assert learned_usage(item(uses=3, successes=3)) == 8


def test_ranking_uses_learned_conviction_and_explains_the_shift() -> None:
    now = T0
    good = item(uses=4, successes=4).model_copy(update={"updated_at": now, "created_at": now})
    bad = item(uses=4, failures=4).model_copy(update={"updated_at": now, "created_at": now})
    w = RankingWeights()
    g, b = (score_hit(SearchHit(i, 0.6), domain=None, now=now, weights=w) for i in (good, bad))
    assert g.score > b.score
    assert g.breakdown["learned_shift"] > 0 > b.breakdown["learned_shift"] and b.breakdown["outcomes"] == 4
    assert b.item.confidence == pytest.approx(learned_conviction(bad))


def test_a_pinned_item_is_never_lowered_by_failures_but_rises_with_successes() -> None:
    base = MemoryItem(id="x", project="p", kind="principle", content="c", confidence=0.6, success_rate=0.7)
    failed = base.model_copy(update={"feedback": Feedback(uses=5, failures=5)})
    assert learned_conviction(failed) < 0.6 and (learned_success_rate(failed) or 0) < 0.7  # unpinned: lowered
    pinned = failed.model_copy(update={"pinned": True})
    assert learned_conviction(pinned) == 0.6 and learned_success_rate(pinned) == 0.7
    assert with_learning(pinned).confidence == 0.6
    good = base.model_copy(update={"pinned": True, "feedback": Feedback(uses=3, successes=3)})
    assert learned_conviction(good) > 0.6 and (learned_success_rate(good) or 0) > 0.7
    assert learned_usage(pinned) == 5  # uses still count
