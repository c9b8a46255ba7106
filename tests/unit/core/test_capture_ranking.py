"""Captured episodes fade faster than other items unless outcomes say they help; stale items are down-weighted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxbus.core.ranking import EPISODE_DECAY, RankingWeights, rank, recency
from ctxbus.memory.model import CAPTURED_SOURCE, Feedback, MemoryItem, MemoryKind
from ctxbus.ports import SearchHit

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
HALF_LIFE = RankingWeights().half_life_days


def episode(age_days: float, *, source: str = CAPTURED_SOURCE, feedback: Feedback | None = None) -> MemoryItem:
    at = NOW - timedelta(days=age_days)
    return MemoryItem(
        id=f"ep-{age_days}-{source}",
        project="p",
        kind=MemoryKind.ATTEMPT,
        content="Past session (successful). Task: fix the reset link.",
        source=source,
        feedback=feedback or Feedback(),
        created_at=at,
        updated_at=at,
    )


def test_a_captured_episode_ages_faster_than_an_imported_one() -> None:
    captured, imported = episode(30), episode(30, source="import")
    assert recency(captured, NOW, HALF_LIFE) < recency(imported, NOW, HALF_LIFE)
    assert recency(captured, NOW, HALF_LIFE) == 0.5 ** (30 * EPISODE_DECAY / HALF_LIFE)


def test_an_episode_that_keeps_helping_ages_like_any_item() -> None:
    helping = episode(30, feedback=Feedback(uses=3, successes=2, failures=1))
    unhelpful = episode(30, feedback=Feedback(uses=3, successes=1, failures=2))
    assert recency(helping, NOW, HALF_LIFE) == recency(episode(30, source="import"), NOW, HALF_LIFE)
    assert recency(unhelpful, NOW, HALF_LIFE) < recency(helping, NOW, HALF_LIFE)


def test_an_old_captured_episode_ranks_below_an_equal_fresh_one() -> None:
    old, fresh = episode(120), episode(1)
    ranked = rank([SearchHit(old, 0.8), SearchHit(fresh, 0.8)], domain=None, now=NOW)
    assert [r.item.id for r in ranked] == [fresh.id, old.id]


def test_a_stale_item_is_down_weighted_not_dropped() -> None:
    kept = MemoryItem(id="a", project="p", kind=MemoryKind.PRINCIPLE, content="Reset tokens live in app/auth/reset.py")
    stale = kept.model_copy(update={"id": "b", "stale": "app/auth/reset.py was deleted", "stale_since": NOW})
    ranked = rank([SearchHit(stale, 0.9), SearchHit(kept, 0.9)], domain=None, now=NOW)
    assert [r.item.id for r in ranked] == ["a", "b"] and ranked[1].score < ranked[0].score
