"""Ranking: every score explained by its breakdown, weights validated, order and cuts deterministic."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.core.ranking import (
    DEFAULT_HALF_LIFE_DAYS,
    NEUTRAL_DOMAIN,
    OUTCOME_WEIGHTS,
    PARTS,
    PIN_BOOST,
    RankedHit,
    RankingWeights,
    domain_match,
    outcome_weight,
    rank,
    recency,
    score_hit,
)
from ctxbus.core.staleness import STALE_WEIGHT
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import SearchHit

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def item(
    item_id: str,
    *,
    project: str = "p",
    domains: tuple[str, ...] = (),
    confidence: float = 0.5,
    age_days: float = 0.0,
) -> MemoryItem:
    at = NOW - timedelta(days=age_days)
    return MemoryItem(
        id=item_id,
        project=project,
        kind=MemoryKind.PRINCIPLE,
        content=f"content of {item_id}",
        domains=domains,
        confidence=confidence,
        created_at=at,
        updated_at=at,
    )


def random_hits(rng: random.Random, count: int) -> list[SearchHit]:
    domains = ["auth", "db", "api", "ui"]
    return [
        SearchHit(
            item(
                f"i{n:03d}",
                domains=tuple(rng.sample(domains, rng.randint(0, 2))),
                confidence=rng.random(),
                age_days=rng.uniform(-10, 1000),
            ),
            rng.uniform(-1, 1),
        )
        for n in range(count)
    ]


def test_default_weights_are_the_documented_ones() -> None:
    w = RankingWeights()
    assert (w.fusion, w.similarity, w.lexical, w.domain, w.conviction, w.recency, w.half_life_days) == (
        0.0,
        0.5,
        0.3,
        0.08,
        0.08,
        0.04,
        90.0,
    )
    assert w.normalised() == pytest.approx(
        {"fusion": 0.0, "similarity": 0.5, "lexical": 0.3, "domain": 0.08, "conviction": 0.08, "recency": 0.04}
    )
    # seed 001's split of the non-relevance half: domain 0.4, conviction 0.4, recency 0.2
    rest = w.domain + w.conviction + w.recency
    assert (w.domain / rest, w.conviction / rest, w.recency / rest) == pytest.approx((0.4, 0.4, 0.2))


def test_weights_are_normalised() -> None:
    assert RankingWeights(similarity=2, domain=1, conviction=1, recency=0, lexical=0).normalised() == pytest.approx(
        {"fusion": 0.0, "similarity": 0.5, "lexical": 0.0, "domain": 0.25, "conviction": 0.25, "recency": 0.0}
    )
    assert math.fsum(RankingWeights(similarity=3, domain=7, conviction=0.1, recency=9).normalised().values()) == (
        pytest.approx(1.0)
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"similarity": -0.1},
        {"domain": -1},
        {"conviction": -1e-9},
        {"recency": -5},
        {"similarity": 0, "domain": 0, "conviction": 0, "recency": 0, "lexical": 0},
        {"lexical": -1},
        {"similarity": float("nan")},
        {"domain": float("inf")},
        {"half_life_days": 0},
        {"half_life_days": -90},
        {"half_life_days": float("nan")},
    ],
)
def test_invalid_weights_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RankingWeights(**kwargs)


def test_weights_are_frozen() -> None:
    w = RankingWeights()
    with pytest.raises(AttributeError):
        w.similarity = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("seed", range(20))
def test_the_breakdown_holds_every_part_and_sums_to_the_score(seed: int) -> None:
    rng = random.Random(seed)
    weights = RankingWeights(
        similarity=rng.uniform(0, 3),
        domain=rng.uniform(0, 3),
        conviction=rng.uniform(0, 3),
        recency=rng.uniform(0.01, 3),
        half_life_days=rng.uniform(1, 365),
    )
    domain = rng.choice([None, "auth", "db", "nowhere"])
    for hit in random_hits(rng, 50):
        ranked = score_hit(hit, domain=domain, now=NOW, weights=weights)
        b = ranked.breakdown
        explained = {
            "outcome_weight",
            "pin_boost",
            "stale_weight",
            "as_warning",
            "learned_shift",
            "outcomes",
            "cosine",
            "total",
        }
        assert set(b) == {*PARTS, *(f"weight_{p}" for p in PARTS), *explained}
        assert all(0.0 <= b[p] <= 1.0 for p in PARTS)
        assert math.fsum(b[f"weight_{p}"] for p in PARTS) == pytest.approx(1.0)
        weighted = math.fsum(b[f"weight_{p}"] * b[p] for p in PARTS)
        factor = b["outcome_weight"]
        assert ranked.score == b["total"] == pytest.approx(weighted * factor + b["pin_boost"])
        assert b["pin_boost"] == 0.0 and b["stale_weight"] == 1.0  # none of these is pinned or stale
        assert 0.0 <= ranked.score <= 1.0
        assert b["conviction"] == hit.item.confidence
        assert b["similarity"] == min(1.0, max(0.0, hit.score))


def test_domain_match_is_one_half_or_zero() -> None:
    tagged = item("a", domains=("auth", "db"))
    assert domain_match(tagged, "auth") == 1.0
    assert domain_match(tagged, " DB ") == 1.0
    assert domain_match(tagged, "ui") == 0.0
    assert domain_match(tagged, None) == NEUTRAL_DOMAIN == 0.5
    assert domain_match(tagged, "   ") == NEUTRAL_DOMAIN
    assert domain_match(item("untagged"), "auth") == 0.0


@pytest.mark.parametrize(
    ("age_days", "half_life", "expected"),
    [
        (0, DEFAULT_HALF_LIFE_DAYS, 1.0),
        (90, DEFAULT_HALF_LIFE_DAYS, 0.5),
        (180, DEFAULT_HALF_LIFE_DAYS, 0.25),
        (45, DEFAULT_HALF_LIFE_DAYS, 0.5**0.5),
        (7, 7, 0.5),
        (-30, DEFAULT_HALF_LIFE_DAYS, 1.0),  # dated after now: as fresh as can be
    ],
)
def test_recency_decays_exponentially_with_the_half_life(age_days: float, half_life: float, expected: float) -> None:
    assert recency(item("a", age_days=age_days), NOW, half_life) == pytest.approx(expected)


def test_the_half_life_is_configurable_through_the_weights() -> None:
    hit = SearchHit(item("a", age_days=30), 0.5)
    fast = score_hit(hit, domain=None, now=NOW, weights=RankingWeights(half_life_days=30))
    slow = score_hit(hit, domain=None, now=NOW, weights=RankingWeights())
    assert fast.breakdown["recency"] == pytest.approx(0.5) and slow.breakdown["recency"] > 0.5
    assert fast.score < slow.score


def test_similarity_is_clamped_to_zero_and_one() -> None:
    low = score_hit(SearchHit(item("a"), -0.7), domain=None, now=NOW, weights=RankingWeights())
    high = score_hit(SearchHit(item("a"), 1.0000001), domain=None, now=NOW, weights=RankingWeights())
    assert (low.breakdown["similarity"], high.breakdown["similarity"]) == (0.0, 1.0)


def test_ranking_is_best_first() -> None:
    hits = [
        SearchHit(item("weak", confidence=0.1, age_days=400), 0.1),
        SearchHit(item("best", domains=("auth",), confidence=0.95), 0.9),
        SearchHit(item("middle", confidence=0.5), 0.6),
    ]
    ranked = rank(hits, domain="auth", now=NOW)
    assert [r.item.id for r in ranked] == ["best", "middle", "weak"]
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert all(isinstance(r, RankedHit) for r in ranked)


@pytest.mark.parametrize("seed", range(10))
def test_ties_are_broken_by_item_id_whatever_the_input_order(seed: int) -> None:
    twins = [SearchHit(item(i), 0.6) for i in ("delta", "alpha", "charlie", "bravo")]
    twins += [SearchHit(item("alpha", project="other"), 0.6), SearchHit(item("alpha", project="a-first"), 0.6)]
    random.Random(seed).shuffle(twins)
    ranked = rank(twins, domain=None, now=NOW)
    assert [(r.item.id, r.item.project) for r in ranked] == [
        ("alpha", "a-first"),
        ("alpha", "other"),
        ("alpha", "p"),
        ("bravo", "p"),
        ("charlie", "p"),
        ("delta", "p"),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_min_score_and_max_items_cut_the_same_order(seed: int) -> None:
    rng = random.Random(seed)
    hits = random_hits(rng, rng.randint(0, 60))
    everything = rank(hits, domain="auth", now=NOW, max_items=len(hits))
    assert len(everything) == len(hits)
    min_score, max_items = rng.uniform(0, 0.8), rng.randint(0, 15)
    cut = rank(hits, domain="auth", now=NOW, min_score=min_score, max_items=max_items)
    assert cut == [r for r in everything if r.score >= min_score][:max_items]


def test_a_similarity_floor_drops_unrelated_hits_however_trusted() -> None:
    unrelated = SearchHit(item("unrelated", domains=("auth",), confidence=1.0), 0.05)
    related = SearchHit(item("related", confidence=0.3), 0.5)
    assert [r.item.id for r in rank([unrelated, related], domain="auth", now=NOW, min_similarity=0.2)] == ["related"]


def test_bad_arguments_are_refused() -> None:
    hits = [SearchHit(item("a"), 0.5)]
    with pytest.raises(ValueError, match="max_items"):
        rank(hits, domain=None, now=NOW, max_items=-1)
    with pytest.raises(ValueError, match="timezone"):
        rank(hits, domain=None, now=datetime(2026, 6, 1))  # naive on purpose
    assert rank([], domain=None, now=NOW) == []


@pytest.mark.parametrize(
    ("outcome", "weight", "as_warning"),
    [("successful", 1.0, 0.0), ("partial", 0.6, 1.0), ("unknown", 0.5, 0.0), (None, 0.5, 0.0), ("failed", 1.0, 1.0)],
)
def test_learnings_weigh_by_their_outcome_and_failures_become_warnings(
    outcome: str | None, weight: float, as_warning: float
) -> None:
    learning = MemoryItem.model_validate(
        {
            "id": "l",
            "project": "p",
            "kind": "learning",
            "content": "Start with an integration test",
            "outcome": outcome,
            "created_at": NOW,
            "updated_at": NOW,
        }
    )
    ranked = score_hit(SearchHit(learning, 0.8), domain=None, now=NOW, weights=RankingWeights())
    assert ranked.breakdown["outcome_weight"] == weight and ranked.breakdown["as_warning"] == as_warning
    pattern = learning.model_copy(update={"kind": MemoryKind.PATTERN})
    plain = score_hit(SearchHit(pattern, 0.8), domain=None, now=NOW, weights=RankingWeights())
    assert ranked.score == pytest.approx(plain.score * weight)


def test_a_pinned_item_gets_the_fixed_boost_and_survives_the_score_cut_but_not_the_relevance_cut() -> None:
    plain = item("a", confidence=0.5)
    pinned = plain.model_copy(update={"id": "b", "pinned": True})
    hits = [SearchHit(plain, 0.6), SearchHit(pinned, 0.6)]
    first, second = rank(hits, domain=None, now=NOW)
    assert (first.item.id, second.item.id) == ("b", "a")  # same evidence: the pin decides
    assert first.breakdown["pin_boost"] == PIN_BOOST and second.breakdown["pin_boost"] == 0.0
    assert first.score == pytest.approx(second.score + PIN_BOOST)
    # a score cut above both keeps only the pinned one; a relevance cut above both keeps neither
    assert [r.item.id for r in rank(hits, domain=None, now=NOW, min_score=0.99)] == ["b"]
    assert rank(hits, domain=None, now=NOW, min_similarity=0.7) == []


def test_a_stale_item_is_down_weighted_never_dropped() -> None:
    fresh = item("a", confidence=0.5)
    stale = fresh.model_copy(update={"id": "b", "stale": "deleted: app/auth/reset.py"})
    first, second = rank([SearchHit(stale, 0.6), SearchHit(fresh, 0.6)], domain=None, now=NOW)
    assert (first.item.id, second.item.id) == ("a", "b")  # same evidence: the stale one goes after
    assert second.breakdown["stale_weight"] == STALE_WEIGHT and first.breakdown["stale_weight"] == 1.0
    assert second.score == pytest.approx(first.score * STALE_WEIGHT)


def test_every_outcome_weight_is_one_a_learning_gets() -> None:
    """Issue 25: nothing carried that nothing reads. A failed learning is a warning at full strength (seed 001
    REQ-021.5), so seed 001's 0.3 for failures was never applied: the table holds only weights in use."""
    for outcome, weight in OUTCOME_WEIGHTS.items():
        learning = MemoryItem.model_validate(
            {"id": "l", "project": "p", "kind": "learning", "content": "c", "outcome": outcome.value}
            | {"created_at": NOW, "updated_at": NOW}
        )
        assert outcome_weight(learning) == weight, outcome
