"""Fusing dense and lexical lists: RRF order, evidence in extra, cosine kept."""

from __future__ import annotations

import pytest

from ctxbus.core.fusion import LEXICAL_HALF, RRF_K, dense_only, fuse, lexical_only, lexical_part
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchHit


def hit(item_id: str, cosine: float, bm25: float | None = None) -> SearchHit:
    item = MemoryItem(id=item_id, project="p", kind="pattern", content=f"text {item_id}")  # type: ignore[arg-type]
    return SearchHit(item, cosine, {} if bm25 is None else {"bm25": bm25})


def test_items_found_by_both_halves_rank_first_with_their_evidence() -> None:
    fused = fuse([hit("a", 0.9), hit("b", 0.8)], [hit("b", 0.8, 7.0), hit("c", 0.1, 3.0)], limit=10)
    assert [h.item.id for h in fused] == ["b", "a", "c"]
    b = fused[0]
    assert b.score == 0.8
    assert b.extra["rrf"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1), abs=1e-6)
    assert (b.extra["dense_rank"], b.extra["sparse_rank"], b.extra["bm25"]) == (2.0, 1.0, 7.0)
    assert b.extra["lexical"] == pytest.approx(7 / (7 + LEXICAL_HALF), abs=1e-6)
    assert fused[1].extra["bm25"] == 0 and fused[1].extra["sparse_rank"] == 0


def test_limit_and_single_lists_keep_their_own_order() -> None:
    dense = [hit("a", 0.9), hit("b", 0.5)]
    assert [h.item.id for h in dense_only(dense, 1)] == ["a"]
    sparse = [hit("c", 0.1, 9.0), hit("d", 0.7, 2.0)]
    assert [h.item.id for h in lexical_only(sparse, 10)] == ["c", "d"]
    assert fuse([], [], 5) == []


def test_lexical_part_is_an_absolute_0_to_1_scale() -> None:
    assert lexical_part(0.0) == 0.0
    assert lexical_part(LEXICAL_HALF) == pytest.approx(0.5)
    assert 0.9 < lexical_part(100.0) < 1.0
