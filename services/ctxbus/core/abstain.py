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

A request whose relevance is below the floor gets no items (empty reason ``nothing_relevant_enough``),
and the explanation names the numbers, the store size and the best candidate. Session-start requests are
exempt: they ask for a project's basics, not for a topic.

The floor depends on the store's size ``n`` (the items the request's scope holds: its project and the global
scope). A prompt about nothing in the store still has a best match, and the best of ``n`` unrelated
memories is closer the more memories there are (the maximum of ``n`` draws grows like ``sqrt(2 ln n)``),
while the one memory a prompt is about is as close in a store of ten as in one of two thousand. So::

    floor(n) = min_relevance + size_slope * ln(n / reference_size)

and the margin counts only from ``margin_from`` items on: in a small store the right memory stands far
above a pack that is nearly the whole store, which is what relevance looks like there, not a sign against
it. A floor fitted on one store size turns away the clear winner of a small store (issue 21: ten
conventions, thirteen on-topic prompts, none got its convention).

The defaults are fitted with ``ctxbus bench retrieval --store-sizes`` on stores of 5 to 2,000 memories (subsets
of the labelled memories with other teams' memories as padding, and small stores of hand-written team
conventions) and judged on other teams' stores and held-out prompts (see ``ctxbus.bench.store_floor``).
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
DEFAULT_MIN_RELEVANCE = 0.425
DEFAULT_PACK_SIZE = 8
DEFAULT_MARGIN_WEIGHT = -0.5
DEFAULT_KEYWORD_WEIGHT = 0.2
#: how the floor moves with the store's size (per unit of ln n), the size it is ``min_relevance`` at, and the
#: store size from which the margin counts
DEFAULT_SIZE_SLOPE = 0.04
DEFAULT_REFERENCE_SIZE = 100
DEFAULT_MARGIN_FROM = 50
#: A floor that lets every request through (relevance is never below -1 - 1 - 0).
NO_FLOOR = -2.0


@dataclass(frozen=True, slots=True)
class FloorPolicy:
    """How the floor weighs the evidence and where it stands (see the module doc)."""

    min_relevance: float = DEFAULT_MIN_RELEVANCE
    pack_size: int = DEFAULT_PACK_SIZE
    margin_weight: float = DEFAULT_MARGIN_WEIGHT
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT
    size_slope: float = DEFAULT_SIZE_SLOPE
    reference_size: int = DEFAULT_REFERENCE_SIZE
    margin_from: int = DEFAULT_MARGIN_FROM

    def __post_init__(self) -> None:
        if self.pack_size < 2:
            raise ValueError(f"pack_size must be at least 2, got {self.pack_size}")
        numbers = (self.min_relevance, self.margin_weight, self.keyword_weight, self.size_slope)
        if not all(math.isfinite(n) for n in numbers):
            raise ValueError(f"floor parameters must be finite, got {numbers}")
        if self.keyword_weight < 0:
            raise ValueError(f"keyword_weight must not be negative, got {self.keyword_weight}")
        if self.reference_size < 1 or self.margin_from < 0:
            raise ValueError(
                f"reference_size must be at least 1 and margin_from not negative, got "
                f"{self.reference_size} and {self.margin_from}"
            )

    @property
    def enabled(self) -> bool:
        return self.min_relevance > NO_FLOOR

    def floor(self, store_size: int | None) -> float:
        """The floor for a store of ``store_size`` items (``min_relevance`` when the size is unknown)."""
        if store_size is None or self.size_slope == 0.0 or not self.enabled:
            return self.min_relevance
        return self.min_relevance + self.size_slope * math.log(max(store_size, 1) / self.reference_size)

    def counts_margin(self, store_size: int | None) -> bool:
        """Whether the margin over the pack counts in a store of ``store_size`` items."""
        return store_size is None or store_size >= self.margin_from


@dataclass(frozen=True, slots=True)
class Evidence:
    """The store's raw evidence about one request's candidates (no ranking weights)."""

    #: cosines of the candidates the dense search found, best first (all candidates when none was)
    cosines: tuple[float, ...]
    best_bm25: float
    #: the candidate with the best cosine, and the one with the best BM25 score
    best_id: str | None = None
    keyword_id: str | None = None
    #: items in the request's scope (its project and the global scope); None: not known
    store_size: int | None = None

    @classmethod
    def of(cls, hits: Sequence[SearchHit], store_size: int | None = None) -> Evidence:
        dense = [h for h in hits if h.extra.get("dense_rank", 0.0) > 0] or list(hits)
        dense.sort(key=lambda h: (-h.score, h.item.id))
        lexical = max(hits, key=lambda h: (h.extra.get("bm25", 0.0), h.item.id), default=None)
        best_bm25 = lexical.extra.get("bm25", 0.0) if lexical is not None else 0.0
        return cls(
            cosines=tuple(h.score for h in dense),
            best_bm25=best_bm25,
            best_id=dense[0].item.id if dense else None,
            keyword_id=lexical.item.id if lexical is not None and best_bm25 > 0 else None,
            store_size=store_size,
        )


@dataclass(frozen=True, slots=True)
class Relevance:
    """A request's relevance and its parts, against the floor it was judged by."""

    best: float
    margin: float
    keyword: float
    score: float
    #: the floor this request was judged by (the policy's floor for its store size)
    min_relevance: float
    best_id: str | None = None
    store_size: int | None = None

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
            "min_relevance": round(self.min_relevance, 6),
            **({"store_size": float(self.store_size)} if self.store_size is not None else {}),
        }

    def explain(self) -> str:
        """One line for notices and logs: why the request was turned away (or let through)."""
        verdict = ">=" if self.passes else "<"
        best = f"; best candidate {self.best_id}" if self.best_id else ""
        size = f" for {self.store_size} items" if self.store_size is not None else ""
        return (
            f"{NOTHING_RELEVANT_ENOUGH if not self.passes else 'relevant'}: relevance {self.score:.3f} {verdict} "
            f"floor {self.min_relevance:.4g}{size} (best cosine {self.best:.3f}, margin {self.margin:.3f}, "
            f"keyword {self.keyword:.3f}){best}"
        )


def relevance(evidence: Evidence, policy: FloorPolicy) -> Relevance | None:
    """The request's relevance under ``policy``; None when there are no candidates to judge."""
    if not evidence.cosines:
        return None
    best = evidence.cosines[0]
    pack = evidence.cosines[: policy.pack_size]
    counted = len(pack) == policy.pack_size and policy.counts_margin(evidence.store_size)
    margin = best - statistics.median(pack) if counted else 0.0
    keyword = lexical_part(evidence.best_bm25)
    score = best + policy.margin_weight * margin + policy.keyword_weight * keyword
    floor = policy.floor(evidence.store_size)
    return Relevance(best, margin, keyword, score, floor, evidence.best_id, evidence.store_size)


def applies(trigger: Trigger, policy: FloorPolicy) -> bool:
    """Whether the floor judges a request with ``trigger``."""
    return policy.enabled and trigger not in EXEMPT_TRIGGERS
