"""Explainable ranking of search hits: a weighted sum whose parts travel with every item.

score = w_sim * similarity + w_domain * domain_match + w_conviction * confidence + w_recency * recency

similarity is the store's cosine (clamped to 0..1); domain_match is 1 when the
item's domains hold the requested domain, a neutral 0.5 when none was requested,
0 otherwise; recency halves every ``half_life_days``. Weights are normalised to
sum to 1, so a score is always in 0..1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchHit

NEUTRAL_DOMAIN = 0.5
DEFAULT_HALF_LIFE_DAYS = 90.0
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class RankingWeights:
    similarity: float = 0.5
    domain: float = 0.2
    conviction: float = 0.2
    recency: float = 0.1
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS

    def __post_init__(self) -> None:
        parts = (self.similarity, self.domain, self.conviction, self.recency)
        if any(not math.isfinite(w) or w < 0 for w in parts):
            raise ValueError(f"ranking weights must be finite and non-negative, got {parts}")
        if sum(parts) <= 0:
            raise ValueError("at least one ranking weight must be positive")
        if not math.isfinite(self.half_life_days) or self.half_life_days <= 0:
            raise ValueError(f"half_life_days must be positive, got {self.half_life_days}")

    def normalised(self) -> dict[str, float]:
        total = self.similarity + self.domain + self.conviction + self.recency
        return {
            "similarity": self.similarity / total,
            "domain": self.domain / total,
            "conviction": self.conviction / total,
            "recency": self.recency / total,
        }


@dataclass(frozen=True, slots=True)
class RankedHit:
    item: MemoryItem
    score: float
    breakdown: Mapping[str, float] = field(default_factory=dict)


def domain_match(item: MemoryItem, domain: str | None) -> float:
    if not domain or not domain.strip():
        return NEUTRAL_DOMAIN
    return 1.0 if domain.strip().lower() in item.domains else 0.0


def recency(item: MemoryItem, now: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (now - item.updated_at).total_seconds() / SECONDS_PER_DAY)
    return float(0.5 ** (age_days / half_life_days))


def score_hit(hit: SearchHit, *, domain: str | None, now: datetime, weights: RankingWeights) -> RankedHit:
    w = weights.normalised()
    parts = {
        "similarity": min(1.0, max(0.0, hit.score)),
        "domain": domain_match(hit.item, domain),
        "conviction": hit.item.confidence,
        "recency": recency(hit.item, now, weights.half_life_days),
    }
    total = sum(w[name] * value for name, value in parts.items())
    breakdown = {**parts, **{f"weight_{k}": v for k, v in w.items()}, "total": total}
    return RankedHit(item=hit.item, score=total, breakdown=breakdown)


def rank(
    hits: Iterable[SearchHit],
    *,
    domain: str | None,
    now: datetime,
    weights: RankingWeights | None = None,
    min_score: float = 0.0,
    min_similarity: float = -1.0,
    max_items: int = 10,
) -> list[RankedHit]:
    """Best first; ties broken by item id; at most ``max_items``.

    Dropped: hits whose similarity is below ``min_similarity`` (not about the request,
    however trusted or recent) and items whose score is below ``min_score``.
    """
    if max_items < 0:
        raise ValueError("max_items must not be negative")
    relevant = [h for h in hits if h.score >= min_similarity]
    scored = [score_hit(h, domain=domain, now=now, weights=weights or RankingWeights()) for h in relevant]
    kept = [r for r in scored if r.score >= min_score]
    kept.sort(key=lambda r: (-r.score, r.item.project, r.item.id))
    return kept[:max_items]
