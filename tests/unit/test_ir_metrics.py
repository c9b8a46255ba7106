"""The benchmark's quality measures, checked by hand-computed cases."""

from __future__ import annotations

import math

import pytest

from ctxbus.bench.ir_metrics import ndcg_at, recall_at, reciprocal_rank

REL = {"a": 3, "b": 1, "c": 2}


def test_recall() -> None:
    assert recall_at(["x", "a", "b", "y"], REL, 2) == pytest.approx(1 / 3)
    assert recall_at(["x", "a", "b", "c"], REL, 10) == 1.0
    assert recall_at(["a"], {}, 5) == 0.0


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(["x", "y", "b"], REL) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "b", "c"], REL, min_grade=2) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x"], REL) == 0.0


def test_ndcg() -> None:
    assert ndcg_at(["a", "c", "b"], REL, 10) == pytest.approx(1.0)
    dcg = 1 / math.log2(2) + 7 / math.log2(3)
    idcg = 7 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(["b", "a", "a"], REL, 10) == pytest.approx(dcg / idcg)  # a repeat gains nothing
    assert ndcg_at(["x"], REL, 10) == 0.0 and ndcg_at(["a"], {}, 10) == 0.0


def test_dedupe_confusion() -> None:
    from ctxbus.bench.dedupe import confusion

    row = confusion([0.95, 0.91, 0.85, 0.93], [True, True, True, False], 0.9)
    assert (row["precision"], row["recall"], row["false_links"]) == (round(2 / 3, 4), round(2 / 3, 4), 1)
    assert confusion([0.5], [False], 0.9)["precision"] == 1.0
