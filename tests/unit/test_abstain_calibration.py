"""The floor's calibration procedure on hand-made samples: budget kept, false injections counted, halves fixed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxbus.bench.abstain_calibration import (
    BUDGETS,
    CALIBRATION,
    HELD_OUT,
    INNER,
    Sample,
    calibrate,
    choose_budget,
    cross_validate,
    highest_floor,
    nested_cross_validate,
    outcome,
    report,
    split_of,
)
from ctxbus.core.abstain import Evidence, FloorPolicy

PLAIN = FloorPolicy(min_relevance=0.0, pack_size=2, margin_weight=0.0, keyword_weight=0.0)


def graded(sample_id: str, best: float, recall_hits: int = 1) -> Sample:
    ranked = tuple(f"r{i}" for i in range(recall_hits)) + ("x",) * (2 - recall_hits)
    return Sample(sample_id, Evidence((best, 0.1), 0.0), ranked, {"r0": 3, "r1": 2})


def null(sample_id: str, best: float, bm25: float = 0.0) -> Sample:
    return Sample(sample_id, Evidence((best, 0.1), bm25), ("x",), {})


SAMPLES = [
    graded("g1", 0.70, 2),
    graded("g2", 0.60, 2),
    graded("g3", 0.50, 1),  # recall@10 0.5
    graded("g4", 0.32, 2),
    null("n1", 0.45),
    null("n2", 0.30),
    null("n3", 0.20, bm25=30.0),
]


def test_the_floor_goes_as_high_as_the_recall_budget_allows() -> None:
    # turning away g4 costs 1.0 / 4 of recall: over a 0.2 budget, so the floor stays at g4's relevance
    assert highest_floor(SAMPLES, PLAIN, 10, 0.2) == 0.32
    # a 0.25 budget affords g4; g3 next would cost 0.125 more
    assert highest_floor(SAMPLES, PLAIN, 10, 0.25) == 0.5
    assert highest_floor(SAMPLES, PLAIN, 10, 0.0) == 0.32


def test_outcome_counts_lost_recall_and_null_prompts_that_still_get_items() -> None:
    result = outcome(SAMPLES, replace(PLAIN, min_relevance=0.5), 10)
    assert result.graded == 4 and result.nulls == 3
    assert result.graded_abstained == 1 and result.recall_loss == pytest.approx(1.0 / 4)
    assert result.false_injection_rate == pytest.approx(0.0)
    everything = outcome(SAMPLES, replace(PLAIN, min_relevance=0.1), 10)
    assert everything.recall_loss == 0.0 and everything.false_injection_rate == pytest.approx(1.0)


def test_calibration_picks_the_policy_that_turns_away_most_null_prompts_within_the_budget() -> None:
    keyword_heavy = replace(PLAIN, keyword_weight=0.5)
    policy, result = calibrate(SAMPLES, 10, 0.25, grid=(keyword_heavy, PLAIN))
    assert policy.keyword_weight == 0.0 and policy.min_relevance == 0.5
    assert result.false_injection_rate == 0.0 and result.recall_loss <= 0.25


def test_halves_are_fixed_by_the_id_and_cross_validation_reports_every_fold() -> None:
    assert {split_of(f"q-{i:03d}") for i in range(40)} == {CALIBRATION, HELD_OUT}
    assert split_of("q-001") == split_of("q-001")
    many = [graded(f"g{i}", 0.4 + i / 100) for i in range(30)] + [null(f"n{i}", 0.2 + i / 100) for i in range(30)]
    cv = cross_validate(many, 10, 0.05)
    assert cv["folds"] == 5 and len(cv["per_fold"]) == 5
    assert sum(f["graded"] for f in cv["per_fold"]) == 30 and sum(f["nulls"] for f in cv["per_fold"]) == 30
    full = report(many, 10, 0.05, FloorPolicy())
    assert set(full) >= {"fitted", "fitted_in_sample", "cross_validation", "halves", "current_in_sample", "tradeoff"}


def test_the_report_cross_validates_each_recall_budget_and_counts_meta_prompts_among_the_null_prompts() -> None:
    """Fitted in sample at a budget, the floor loses more recall on unseen prompts: the report shows the
    out-of-sample figures for stricter budgets too, and the false injection rate over every null prompt
    (meta prompts are turned away by rule and never get items)."""
    many = [graded(f"g{i}", 0.4 + i / 100) for i in range(30)] + [null(f"n{i}", 0.2 + i / 100) for i in range(30)]
    full = report(many, 10, 0.05, FloorPolicy(), meta_prompts=10)
    by_budget = full["cross_validation_by_budget"]
    assert [row["budget"] for row in by_budget] == sorted({*BUDGETS, 0.05})
    for row in by_budget:
        cv = cross_validate(many, 10, row["budget"])
        assert row["false_injection_rate"] == cv["false_injection_rate"]
        assert row["recall_loss"] == cv["recall_loss"]
        assert row["false_injection_rate_all_nulls"] == pytest.approx(cv["false_injection_rate"] * 30 / 40, abs=1e-4)
    assert full["samples"]["meta_prompts"] == 10


def test_nested_cross_validation_judges_the_choice_of_budget_on_prompts_it_never_saw() -> None:
    many = [graded(f"g{i}", 0.4 + i / 100) for i in range(30)] + [null(f"n{i}", 0.2 + i / 100) for i in range(30)]
    chosen = choose_budget(many, 10, 0.02)
    fits = [b for b in BUDGETS if cross_validate(many, 10, b, salt=INNER)["recall_loss"] <= 0.02]
    assert chosen == (max(fits) if fits else min(BUDGETS))
    nested = nested_cross_validate(many, 10, 0.02)
    assert nested["folds"] == 5 and len(nested["per_fold"]) == 5
    assert all(f["budget"] in BUDGETS for f in nested["per_fold"])
    assert sum(f["graded"] for f in nested["per_fold"]) == 30 and sum(f["nulls"] for f in nested["per_fold"]) == 30
    assert "nested_cross_validation" in report(many, 10, 0.02, FloorPolicy())
