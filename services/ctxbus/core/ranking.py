"""Explainable ranking of search hits: a weighted sum whose parts travel with every item.

score = (w_sim * similarity + w_lexical * lexical + w_domain * domain_match + w_conviction * confidence
         + w_recency * recency) * outcome_weight

similarity and lexical are the hit's cosine and BM25 score relative to the best of the candidates
ranked together (so the best match by meaning, and the best by keywords, score 1; an item found by
meaning only has lexical 0): how relevant an item is decides most of its score, and the raw
``cosine`` and ``bm25`` travel in the breakdown too. Scored alone (no candidate set), they are the
absolute cosine and the squashed BM25 of ctxbus.core.fusion. domain_match is 1 when the
item's domains hold the requested domain, a neutral 0.5 when none was requested,
0 otherwise; conviction is the item's confidence; recency halves every
``half_life_days`` of age (since ``updated_at``, at the ``now`` given). Weights
are normalised to sum to 1, so a score is always in 0..1, and the breakdown of
every ranked hit holds each part, each normalised weight (``weight_<part>``)
and the ``total``: sum(weight_<part> * <part>) == total == score.

Ties are broken by item id (then project), so the order is deterministic.

A pinned item (``ctxbus memory pin``) gets a fixed ``PIN_BOOST`` added to its total (the breakdown's
``pin_boost``; ``total`` = weighted sum * outcome weight + pin_boost), is exempt from negative feedback
(:func:`ctxbus.core.learning.with_learning`) and is never dropped by ``min_score``. It is not forced into
unrelated contexts: it still needs the relevance (``min_similarity``) and the retriever's relevance floor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ctxbus.core.fusion import RRF_K
from ctxbus.core.learning import with_learning
from ctxbus.core.sections import is_cautionary
from ctxbus.core.staleness import STALE_WEIGHT
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
#: ``min_score`` that drops nothing (a session start: the project's basics, whatever resembles its generic request)
NO_SCORE_FLOOR = float("-inf")
#: Seed 001: how much a past session's learning counts, by the session's outcome. A failed one is not here:
#: seed 001's 0.3 is replaced by REQ-021.5's treatment, a warning at full strength (``outcome_weight``).
OUTCOME_WEIGHTS: dict[Outcome, float] = {
    Outcome.SUCCESSFUL: 1.0,
    Outcome.PARTIAL: 0.6,
    Outcome.UNKNOWN: 0.5,
}
#: A BM25 score that is clearly a keyword match (several rare query terms): the best keyword match of a
#: candidate set counts fully only from here on, so a set matched only on common words is not inflated.
STRONG_BM25 = 15.0
#: What the store says about how it found a hit, carried into the breakdown as is.
SEARCH_EVIDENCE = ("bm25", "rrf", "dense_rank", "sparse_rank")
#: The parts of a score, in breakdown order.
PARTS = ("fusion", "similarity", "lexical", "domain", "conviction", "recency")
#: What a pin adds to an item's score: about what a full domain match adds, so among the relevant a pinned item
#: rises, yet relevance still decides most of the order.
PIN_BOOST = 0.08
#: 1 / the reciprocal-rank fusion of an item first in both lists (scales an absolute rrf to 0..1)
BEST_RRF_INVERSE = (RRF_K + 1.0) / 2.0


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """How much each part counts (normalised before use) and how fast recency decays.

    The defaults give relevance (similarity 0.5 + lexical 0.3) most of the score and split the rest
    as seed 001 does: domain 0.4, conviction 0.4, recency 0.2 of it. Measured with
    ``ctxbus bench retrieval``: when priors weigh as much as relevance, a trusted but barely related
    item outranks the one the task is about.
    """

    similarity: float = 0.5
    domain: float = 0.08
    conviction: float = 0.08
    recency: float = 0.04
    lexical: float = 0.3
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    fusion: float = 0.0

    def __post_init__(self) -> None:
        parts = self._values()
        if any(not math.isfinite(w) or w < 0 for w in parts):
            raise ValueError(f"ranking weights must be finite and non-negative, got {parts}")
        if sum(parts) <= 0:
            raise ValueError("at least one ranking weight must be positive")
        if not math.isfinite(self.half_life_days) or self.half_life_days <= 0:
            raise ValueError(f"half_life_days must be positive, got {self.half_life_days}")

    def _values(self) -> tuple[float, ...]:
        return (self.fusion, self.similarity, self.lexical, self.domain, self.conviction, self.recency)

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
    #: near copies of the item (its cluster) left out of the context in its favour (see ctxbus.core.collapse)
    collapsed_ids: tuple[str, ...] = ()


def domain_match(item: MemoryItem, domain: str | None) -> float:
    """1.0 when ``domain`` is among the item's domains, NEUTRAL_DOMAIN when none requested, else 0.0."""
    if not domain or not domain.strip():
        return NEUTRAL_DOMAIN
    return 1.0 if domain.strip().lower() in item.domains else 0.0


#: a captured episode (a past session, ctxbus.capture) ages this much faster than other items, until it helps
EPISODE_DECAY = 3.0
# (a weight of 0.85 on such an episode's score, fitted on fit..heldout16, lost 2 of 60 later tasks' lessons from the
# top 3 on heldout17 and 3 of 60 on heldout18, which it was not fitted on: taken out in session 22, docs/capture.md)


def keeps_helping(item: MemoryItem) -> bool:
    """Outcomes say the item helps: more successes than failures among the sessions it was injected into."""
    fb = item.feedback
    return fb.successes > 0 and fb.successes > fb.failures


def is_fading_episode(item: MemoryItem) -> bool:
    """A captured episode that outcomes have not (yet) shown to help."""
    return item.captured and item.kind is MemoryKind.ATTEMPT and not keeps_helping(item)


def half_life(item: MemoryItem, half_life_days: float) -> float:
    """The item's half-life: a captured episode's is EPISODE_DECAY times shorter unless it keeps helping (a past
    session that nobody's work went better for fades; one that helps ages like any other item)."""
    if is_fading_episode(item):
        return half_life_days / EPISODE_DECAY
    return half_life_days


def recency(item: MemoryItem, now: datetime, half_life_days: float) -> float:
    """0.5 ** (age / half-life), age from ``updated_at``; 1.0 for an item dated after ``now`` (half-life: see
    :func:`half_life`)."""
    age_days = max(0.0, (now - item.updated_at).total_seconds() / SECONDS_PER_DAY)
    return float(0.5 ** (age_days / half_life(item, half_life_days)))


def outcome_weight(item: MemoryItem) -> float:
    """Seed 001's weight of a learning by its session's outcome; 1 for other kinds and for failed learnings
    (a failed approach is not a weak recommendation but a warning at full strength; a partial one is shown
    as a warning too, at seed 001's 0.6)."""
    if item.kind is not MemoryKind.LEARNING or item.outcome is Outcome.FAILED:
        return 1.0
    return OUTCOME_WEIGHTS[item.outcome or Outcome.UNKNOWN]


def relevance(hit: SearchHit) -> float:
    """How much a hit is about the request: the stronger of its meaning and its keyword evidence."""
    return max(hit.score, hit.extra.get("lexical", 0.0))


@dataclass(frozen=True, slots=True)
class Scale:
    """The best cosine and the best BM25 score among the candidates ranked together."""

    cosine: float
    bm25: float
    rrf: float = 0.0

    @classmethod
    def of(cls, hits: Sequence[SearchHit]) -> Scale:
        return cls(
            cosine=max((h.score for h in hits), default=0.0),
            bm25=max((h.extra.get("bm25", 0.0) for h in hits), default=0.0),
            rrf=max((h.extra.get("rrf", 0.0) for h in hits), default=0.0),
        )


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def score_hit(
    hit: SearchHit, *, domain: str | None, now: datetime, weights: RankingWeights, scale: Scale | None = None
) -> RankedHit:
    """The hit's score (times the outcome weight of learnings) and its breakdown; relevance relative to
    ``scale`` (the candidates' best) when given, else absolute."""
    w = weights.normalised()
    base_conviction = hit.item.confidence
    hit = SearchHit(with_learning(hit.item), hit.score, hit.extra)  # outcomes' lessons, bounded (core.learning)
    bm25 = hit.extra.get("bm25", 0.0)
    rrf = hit.extra.get("rrf", 0.0)
    if scale is None:
        similarity, lexical = _unit(hit.score), _unit(hit.extra.get("lexical", 0.0))
        fusion = _unit(rrf * BEST_RRF_INVERSE)
    else:
        similarity = _unit(hit.score / scale.cosine) if scale.cosine > 0 else 0.0
        lexical = _unit(bm25 / max(scale.bm25, STRONG_BM25))
        fusion = _unit(rrf / scale.rrf) if scale.rrf > 0 else 0.0
    parts = {
        "fusion": fusion,
        "similarity": similarity,
        "lexical": lexical,
        "domain": domain_match(hit.item, domain),
        "conviction": hit.item.confidence,
        "recency": recency(hit.item, now, weights.half_life_days),
    }
    factor = outcome_weight(hit.item)
    boost = PIN_BOOST if hit.item.pinned else 0.0
    # a file it names was deleted or rewritten past recognition (core.staleness): down-weighted, never dropped
    stale = STALE_WEIGHT if hit.item.stale else 1.0
    total = sum(w[name] * value for name, value in parts.items()) * factor * stale + boost
    breakdown = {
        **parts,
        **{f"weight_{k}": v for k, v in w.items()},
        "outcome_weight": factor,
        "pin_boost": boost,
        "stale_weight": stale,
        "as_warning": float(is_cautionary(hit.item)),
        "learned_shift": hit.item.confidence - base_conviction,
        "outcomes": float(hit.item.feedback.uses),
        "cosine": hit.score,
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
    scale = Scale.of(relevant)
    chosen = weights or RankingWeights()
    scored = [score_hit(h, domain=domain, now=now, weights=chosen, scale=scale) for h in relevant]
    kept = [r for r in scored if r.score >= min_score or r.item.pinned]
    kept.sort(key=lambda r: (-r.score, r.item.id, r.item.project))
    return kept[:max_items]
