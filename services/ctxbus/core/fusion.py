"""Fusing the dense and the lexical result lists of a hybrid search into one candidate list.

Pure, and the same for every vector-store adapter: each adapter runs the two searches in its
engine (dense cosine; sparse BM25 with the IDF modifier) and hands both lists here.

Every fused hit keeps its cosine similarity as ``score`` (the ranking's similarity part) and
carries in ``extra``:

- ``bm25``: the raw lexical score (0 when the lexical search did not find it);
- ``lexical``: that score squashed into 0..1 as ``bm25 / (bm25 + LEXICAL_HALF)``, an absolute
  scale (the same item and query always get the same value, whatever else was found);
- ``dense_rank`` / ``sparse_rank``: 1-based positions in each list (0: absent);
- ``rrf``: reciprocal-rank fusion, ``sum(1 / (RRF_K + rank))`` over the lists that found it.

The fused list is ordered by ``rrf`` (ties: higher cosine, then id), the usual hybrid order; the
ranking then re-scores it with the task's weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbus.ports import SearchHit

#: RRF's damping constant (the customary 60).
RRF_K = 60.0
#: The BM25 score that maps to a lexical part of 0.5.
LEXICAL_HALF = 6.0


def lexical_part(bm25: float) -> float:
    """A BM25 score on a 0..1 scale (0 for no lexical match)."""
    return bm25 / (bm25 + LEXICAL_HALF) if bm25 > 0 else 0.0


def _key(hit: SearchHit) -> tuple[str, str]:
    return hit.item.project, hit.item.id


def fuse(dense: Sequence[SearchHit], sparse: Sequence[SearchHit], limit: int) -> list[SearchHit]:
    """One list from a dense (``score`` = cosine) and a sparse (``score`` = cosine, ``extra['bm25']``) list."""
    found: dict[tuple[str, str], SearchHit] = {}
    dense_rank: dict[tuple[str, str], int] = {}
    sparse_rank: dict[tuple[str, str], int] = {}
    bm25: dict[tuple[str, str], float] = {}
    for rank, hit in enumerate(dense, start=1):
        found.setdefault(_key(hit), hit)
        dense_rank.setdefault(_key(hit), rank)
    for rank, hit in enumerate(sparse, start=1):
        found.setdefault(_key(hit), hit)
        sparse_rank.setdefault(_key(hit), rank)
        bm25.setdefault(_key(hit), hit.extra.get("bm25", 0.0))
    fused: list[SearchHit] = []
    for key, hit in found.items():
        d, s = dense_rank.get(key, 0), sparse_rank.get(key, 0)
        rrf = (1.0 / (RRF_K + d) if d else 0.0) + (1.0 / (RRF_K + s) if s else 0.0)
        raw = bm25.get(key, 0.0)
        extra = {
            "bm25": round(raw, 6),
            "lexical": round(lexical_part(raw), 6),
            "dense_rank": float(d),
            "sparse_rank": float(s),
            "rrf": round(rrf, 6),
        }
        fused.append(SearchHit(item=hit.item, score=hit.score, extra=extra))
    fused.sort(key=lambda h: (-h.extra["rrf"], -h.score, h.item.id, h.item.project))
    return fused[: max(limit, 0)]


def lexical_only(sparse: Sequence[SearchHit], limit: int) -> list[SearchHit]:
    """The sparse list alone, annotated like :func:`fuse` annotates (for sparse-only searches)."""
    return fuse((), sparse, limit)


def dense_only(dense: Sequence[SearchHit], limit: int) -> list[SearchHit]:
    """The dense list alone, annotated like :func:`fuse` annotates (no lexical evidence)."""
    return fuse(dense, (), limit)
