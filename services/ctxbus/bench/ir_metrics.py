"""Retrieval quality measures over graded relevance: recall@k, MRR, nDCG@k. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant items (grade >= 1) found in the first ``k``."""
    wanted = {i for i, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def reciprocal_rank(ranked: Sequence[str], relevant: Mapping[str, int], min_grade: int = 1) -> float:
    """1 / the position of the first item of at least ``min_grade`` (0 when none is ranked)."""
    for position, item in enumerate(ranked, start=1):
        if relevant.get(item, 0) >= min_grade:
            return 1.0 / position
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain with gains 2^grade - 1 (each item counted once)."""
    seen: set[str] = set()
    dcg = 0.0
    for position, item in enumerate(ranked[:k], start=1):
        if item in seen:
            continue
        seen.add(item)
        dcg += (2 ** relevant.get(item, 0) - 1) / math.log2(position + 1)
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(p + 1) for p, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0
