"""The relevance floor: inject nothing rather than noise.

The ranking orders candidates relative to each other (the best of a set scores near 1 however
unrelated the set is), so it cannot tell a request that has relevant memories from one that has
none. The floor decides that, from the store's raw evidence about the candidates, before any
weighting:

- ``best``: the best candidate's cosine similarity (dense evidence: how close the closest memory is
  in meaning);
- ``margin``: the best cosine minus the median cosine of the ``pack_size`` best candidates (how far
  the best stands out from the pack); 0 when there are fewer candidates than that (a small store has
  no pack to compare with, and its best candidate is judged alone);
- ``keyword``: the best BM25 score among the candidates on a 0..1 scale (``bm25 / (bm25 + 6)``, the
  fusion's absolute lexical part: exact identifiers, error strings and config keys).

::

    relevance = best + margin_weight * margin + keyword_weight * keyword

A request whose relevance is below ``min_relevance`` gets no items (empty reason
``nothing_relevant_enough``), and the explanation names the numbers and the best candidate.
Session-start requests are exempt: they ask for a project's basics, not for a topic.

The defaults are calibrated with ``ctxbus bench retrieval --calibrate`` on the labelled set (graded
queries and null prompts): the most null prompts turned away while the graded queries lose at most
2 points of recall@10; cross-validation says how well that carries to prompts it was not fitted on.
On that set a best match that stands out from its pack did not mark relevance (a prompt about
nothing in the store still has a best match, above an even weaker pack), while a pack that is close
too did: the calibrated margin weight is negative, so the floor asks for a close best match *and*
a close neighbourhood, and a lone outlier counts for less.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ctxbus.contract.payloads import Trigger
from ctxbus.core.fusion import lexical_part
from ctxbus.ports import SearchHit

#: The empty reason of a request the floor turns away.
NOTHING_RELEVANT_ENOUGH = "nothing_relevant_enough"
#: Triggers the floor does not apply to (a session start asks for the project's basics).
EXEMPT_TRIGGERS = frozenset({Trigger.SESSION_START})
#: Calibrated defaults (see the module doc and ``ctxbus bench retrieval --calibrate``).
DEFAULT_MIN_RELEVANCE = 0.458
DEFAULT_PACK_SIZE = 8
DEFAULT_MARGIN_WEIGHT = -0.5
DEFAULT_KEYWORD_WEIGHT = 0.2
#: A floor that lets every request through (relevance is never below -1 - 1 - 0).
NO_FLOOR = -2.0


@dataclass(frozen=True, slots=True)
class FloorPolicy:
    """How the floor weighs the evidence and where it stands (see the module doc)."""

    min_relevance: float = DEFAULT_MIN_RELEVANCE
    pack_size: int = DEFAULT_PACK_SIZE
    margin_weight: float = DEFAULT_MARGIN_WEIGHT
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT

    def __post_init__(self) -> None:
        if self.pack_size < 2:
            raise ValueError(f"pack_size must be at least 2, got {self.pack_size}")
        numbers = (self.min_relevance, self.margin_weight, self.keyword_weight)
        if not all(math.isfinite(n) for n in numbers):
            raise ValueError(f"floor parameters must be finite, got {numbers}")
        if self.keyword_weight < 0:
            raise ValueError(f"keyword_weight must not be negative, got {self.keyword_weight}")

    @property
    def enabled(self) -> bool:
        return self.min_relevance > NO_FLOOR


@dataclass(frozen=True, slots=True)
class Evidence:
    """The store's raw evidence about one request's candidates (no ranking weights)."""

    #: cosines of the candidates the dense search found, best first (all candidates when none was)
    cosines: tuple[float, ...]
    best_bm25: float
    #: the candidate with the best cosine, and the one with the best BM25 score
    best_id: str | None = None
    keyword_id: str | None = None

    @classmethod
    def of(cls, hits: Sequence[SearchHit]) -> Evidence:
        dense = [h for h in hits if h.extra.get("dense_rank", 0.0) > 0] or list(hits)
        dense.sort(key=lambda h: (-h.score, h.item.id))
        lexical = max(hits, key=lambda h: (h.extra.get("bm25", 0.0), h.item.id), default=None)
        best_bm25 = lexical.extra.get("bm25", 0.0) if lexical is not None else 0.0
        return cls(
            cosines=tuple(h.score for h in dense),
            best_bm25=best_bm25,
            best_id=dense[0].item.id if dense else None,
            keyword_id=lexical.item.id if lexical is not None and best_bm25 > 0 else None,
        )


@dataclass(frozen=True, slots=True)
class Relevance:
    """A request's relevance and its parts, against the floor it was judged by."""

    best: float
    margin: float
    keyword: float
    score: float
    min_relevance: float
    best_id: str | None = None

    @property
    def passes(self) -> bool:
        return self.score >= self.min_relevance

    def breakdown(self) -> dict[str, float]:
        """The numbers for an item's breakdown (the same for every item of the request)."""
        return {
            "relevance": round(self.score, 6),
            "relevance_best": round(self.best, 6),
            "relevance_margin": round(self.margin, 6),
            "relevance_keyword": round(self.keyword, 6),
            "min_relevance": self.min_relevance,
        }

    def explain(self) -> str:
        """One line for notices and logs: why the request was turned away (or let through)."""
        verdict = ">=" if self.passes else "<"
        best = f"; best candidate {self.best_id}" if self.best_id else ""
        return (
            f"{NOTHING_RELEVANT_ENOUGH if not self.passes else 'relevant'}: relevance {self.score:.3f} {verdict} "
            f"{self.min_relevance:g} (best cosine {self.best:.3f}, margin {self.margin:.3f}, "
            f"keyword {self.keyword:.3f}){best}"
        )


def relevance(evidence: Evidence, policy: FloorPolicy) -> Relevance | None:
    """The request's relevance under ``policy``; None when there are no candidates to judge."""
    if not evidence.cosines:
        return None
    best = evidence.cosines[0]
    pack = evidence.cosines[: policy.pack_size]
    margin = best - statistics.median(pack) if len(pack) == policy.pack_size else 0.0
    keyword = lexical_part(evidence.best_bm25)
    score = best + policy.margin_weight * margin + policy.keyword_weight * keyword
    return Relevance(best, margin, keyword, score, policy.min_relevance, evidence.best_id)


def applies(trigger: Trigger, policy: FloorPolicy) -> bool:
    """Whether the floor judges a request with ``trigger``."""
    return policy.enabled and trigger not in EXEMPT_TRIGGERS
