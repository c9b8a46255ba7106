from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.core.ranking import NEUTRAL_DOMAIN, RankingWeights, rank, recency, score_hit
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import SearchHit

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def item(i: str, *, domains: tuple[str, ...] = (), confidence: float = 0.5, age_days: float = 0) -> MemoryItem:
    at = NOW - timedelta(days=age_days)
    return MemoryItem(
        id=i,
        project="p",
        kind=MemoryKind.PATTERN,
        content=f"content {i}",
        domains=domains,
        confidence=confidence,
        created_at=at,
        updated_at=at,
    )


def test_breakdown_parts_sum_to_the_score() -> None:
    hit = SearchHit(item(i="a", domains=("auth",), confidence=0.9, age_days=45), 0.8)
    ranked = score_hit(hit, domain="auth", now=NOW, weights=RankingWeights())
    b = ranked.breakdown
    expected = sum(b[f"weight_{k}"] * b[k] for k in ("similarity", "domain", "conviction", "recency"))
    assert ranked.score == pytest.approx(expected) == pytest.approx(b["total"])
    assert b["domain"] == 1.0 and b["conviction"] == 0.9
    assert b["recency"] == pytest.approx(0.5**0.5)  # 45 days at a 90-day half-life


def test_domain_match_neutral_without_a_requested_domain() -> None:
    hit = SearchHit(item("a", domains=("db",)), 0.5)
    assert score_hit(hit, domain=None, now=NOW, weights=RankingWeights()).breakdown["domain"] == NEUTRAL_DOMAIN
    assert score_hit(hit, domain="auth", now=NOW, weights=RankingWeights()).breakdown["domain"] == 0.0
    assert score_hit(hit, domain=" DB ", now=NOW, weights=RankingWeights()).breakdown["domain"] == 1.0


def test_rank_orders_filters_and_caps() -> None:
    hits = [
        SearchHit(item("low", confidence=0.1, age_days=400), 0.1),
        SearchHit(item("best", domains=("auth",), confidence=0.95), 0.9),
        SearchHit(item("mid", confidence=0.5), 0.6),
        SearchHit(item("tie-b", confidence=0.5), 0.6),
    ]
    ranked = rank(hits, domain="auth", now=NOW, min_score=0.2, max_items=3)
    assert [r.item.id for r in ranked] == ["best", "mid", "tie-b"]
    assert all(r.score >= 0.2 for r in ranked)
    assert rank(hits, domain="auth", now=NOW, max_items=0) == []


def test_similarity_can_be_outweighed_by_domain_and_conviction() -> None:
    on_topic = SearchHit(item("trusted", domains=("auth",), confidence=1.0), 0.55)
    off_topic = SearchHit(item("similar", domains=("ui",), confidence=0.2), 0.6)
    assert rank([off_topic, on_topic], domain="auth", now=NOW)[0].item.id == "trusted"
    only_similarity = RankingWeights(similarity=1, domain=0, conviction=0, recency=0)
    assert rank([off_topic, on_topic], domain="auth", now=NOW, weights=only_similarity)[0].item.id == "similar"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"similarity": -0.1},
        {"similarity": 0, "domain": 0, "conviction": 0, "recency": 0},
        {"recency": float("nan")},
        {"half_life_days": 0},
    ],
)
def test_invalid_weights_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RankingWeights(**kwargs)


def test_recency_halves_every_half_life_and_never_exceeds_one() -> None:
    assert recency(item("a", age_days=90), NOW, 90) == pytest.approx(0.5)
    assert recency(item("a", age_days=180), NOW, 90) == pytest.approx(0.25)
    assert recency(item("a", age_days=-5), NOW, 90) == 1.0


def test_hits_below_the_similarity_floor_are_dropped_however_trusted() -> None:
    trusted_but_unrelated = SearchHit(item("hook", domains=("auth",), confidence=1.0), 0.01)
    related = SearchHit(item("reset", confidence=0.3), 0.5)
    assert [r.item.id for r in rank([trusted_but_unrelated, related], domain="auth", now=NOW)] == ["hook", "reset"]
    assert [r.item.id for r in rank([trusted_but_unrelated, related], domain="auth", now=NOW, min_similarity=0.2)] == [
        "reset"
    ]
