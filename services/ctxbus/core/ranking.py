"""Explainable ranking of search hits: a weighted sum whose parts travel with every item.

score = (w_sim * similarity + w_lexical * lexical + w_domain * domain_match + w_conviction * confidence
         + w_recency * recency) * outcome_weight

similarity is the store's cosine (clamped to 0..1); lexical is the keyword evidence of hybrid
search (BM25 on a 0..1 scale, see ctxbus.core.fusion; 0 when the item was found by meaning
only); domain_match is 1 when the
item's domains hold the requested domain, a neutral 0.5 when none was requested,
0 otherwise; conviction is the item's confidence; recency halves every
``half_life_days`` of age (since ``updated_at``, at the ``now`` given). Weights
are normalised to sum to 1, so a score is always in 0..1, and the breakdown of
every ranked hit holds each part, each normalised weight (``weight_<part>``)
and the ``total``: sum(weight_<part> * <part>) == total == score.

Ties are broken by item id (then project), so the order is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ctxbus.core.learning import with_learning
from ctxbus.core.sections import is_cautionary
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome
from ctxbus.ports import SearchHit

#: Domain match when no domain was requested: neither a bonus nor a penalty.
NEUTRAL_DOMAIN = 0.5
DEFAULT_HALF_LIFE_DAYS = 90.0
SECONDS_PER_DAY = 86_400.0
#: Default cap on the number of ranked hits returned.
DEFAULT_MAX_ITEMS = 10
#: A similarity floor that keeps every hit (cosine similarity is never below -1).
NO_SIMILARITY_FLOOR = -1.0
#: Seed 001: how much a past session's learning counts, by the session's outcome.
OUTCOME_WEIGHTS: dict[Outcome, float] = {
    Outcome.SUCCESSFUL: 1.0,
    Outcome.PARTIAL: 0.6,
    Outcome.FAILED: 0.3,
    Outcome.UNKNOWN: 0.5,
}
#: What the store says about how it found a hit, carried into the breakdown as is.
SEARCH_EVIDENCE = ("bm25", "rrf", "dense_rank", "sparse_rank")
#: The parts of a score, in breakdown order.
PARTS = ("similarity", "lexical", "domain", "conviction", "recency")


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """How much each part counts (normalised before use) and how fast recency decays.

    The defaults give relevance (similarity + lexical) half the score and split the other half as
    seed 001 does: domain 0.4, conviction 0.4, recency 0.2.
    """

    similarity: float = 0.4
    domain: float = 0.2
    conviction: float = 0.2
    recency: float = 0.1
    lexical: float = 0.1
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS

    def __post_init__(self) -> None:
        parts = self._values()
        if any(not math.isfinite(w) or w < 0 for w in parts):
            raise ValueError(f"ranking weights must be finite and non-negative, got {parts}")
        if sum(parts) <= 0:
            raise ValueError("at least one ranking weight must be positive")
        if not math.isfinite(self.half_life_days) or self.half_life_days <= 0:
            raise ValueError(f"half_life_days must be positive, got {self.half_life_days}")

    def _values(self) -> tuple[float, ...]:
        return (self.similarity, self.lexical, self.domain, self.conviction, self.recency)

    def normalised(self) -> dict[str, float]:
        """The weights scaled to sum to 1, by part name."""
        values = self._values()
        total = sum(values)
        return dict(zip(PARTS, (v / total for v in values), strict=True))


@dataclass(frozen=True, slots=True)
class RankedHit:
    """A hit with its final score and the breakdown that explains it."""

    item: MemoryItem
    score: float
    breakdown: Mapping[str, float] = field(default_factory=dict)


def domain_match(item: MemoryItem, domain: str | None) -> float:
    """1.0 when ``domain`` is among the item's domains, NEUTRAL_DOMAIN when none requested, else 0.0."""
    if not domain or not domain.strip():
        return NEUTRAL_DOMAIN
    return 1.0 if domain.strip().lower() in item.domains else 0.0


def recency(item: MemoryItem, now: datetime, half_life_days: float) -> float:
    """0.5 ** (age / half-life), age from ``updated_at``; 1.0 for an item dated after ``now``."""
    age_days = max(0.0, (now - item.updated_at).total_seconds() / SECONDS_PER_DAY)
    return float(0.5 ** (age_days / half_life_days))


def outcome_weight(item: MemoryItem) -> float:
    """Seed 001's weight of a learning by its session's outcome; 1 for other kinds and for failed learnings
    (a failed approach is not a weak recommendation but a full-strength warning: it is shown as one)."""
    if item.kind is not MemoryKind.LEARNING or item.outcome is Outcome.FAILED:
        return 1.0
    return OUTCOME_WEIGHTS[item.outcome or Outcome.UNKNOWN]


def relevance(hit: SearchHit) -> float:
    """How much a hit is about the request: the stronger of its meaning and its keyword evidence."""
    return max(hit.score, hit.extra.get("lexical", 0.0))


def score_hit(hit: SearchHit, *, domain: str | None, now: datetime, weights: RankingWeights) -> RankedHit:
    """The hit's score (similarity clamped to 0..1, times the outcome weight of learnings) and its breakdown."""
    w = weights.normalised()
    base_conviction = hit.item.confidence
    hit = SearchHit(with_learning(hit.item), hit.score, hit.extra)  # outcomes' lessons, bounded (core.learning)
    parts = {
        "similarity": min(1.0, max(0.0, hit.score)),
        "lexical": min(1.0, max(0.0, hit.extra.get("lexical", 0.0))),
        "domain": domain_match(hit.item, domain),
        "conviction": hit.item.confidence,
        "recency": recency(hit.item, now, weights.half_life_days),
    }
    factor = outcome_weight(hit.item)
    total = sum(w[name] * value for name, value in parts.items()) * factor
    breakdown = {
        **parts,
        **{f"weight_{k}": v for k, v in w.items()},
        "outcome_weight": factor,
        "as_warning": float(is_cautionary(hit.item)),
        "learned_shift": hit.item.confidence - base_conviction,
        "outcomes": float(hit.item.feedback.uses),
        **{k: v for k, v in hit.extra.items() if k in SEARCH_EVIDENCE},
        "total": total,
    }
    return RankedHit(item=hit.item, score=total, breakdown=breakdown)


def rank(
    hits: Iterable[SearchHit],
    *,
    domain: str | None,
    now: datetime,
    weights: RankingWeights | None = None,
    min_score: float = 0.0,
    min_similarity: float = NO_SIMILARITY_FLOOR,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> list[RankedHit]:
    """Best first; ties broken by item id; at most ``max_items``.

    Dropped: hits whose relevance (similarity, or keyword evidence) is below ``min_similarity``
    (not about the request, however trusted or recent) and items whose score is below ``min_score``.
    ``now`` must be timezone-aware (item dates are).
    """
    if max_items < 0:
        raise ValueError("max_items must not be negative")
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    relevant = [h for h in hits if relevance(h) >= min_similarity]
    scored = [score_hit(h, domain=domain, now=now, weights=weights or RankingWeights()) for h in relevant]
    kept = [r for r in scored if r.score >= min_score]
    kept.sort(key=lambda r: (-r.score, r.item.id, r.item.project))
    return kept[:max_items]
