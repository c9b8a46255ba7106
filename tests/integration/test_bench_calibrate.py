"""``ctxbus bench retrieval --calibrate`` end to end on a small labelled set: the real retriever's evidence,
the fit and its cross-validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.bench import abstain_calibration, retrieval_calibrate

from .test_bench_retrieval import MEMORIES, NULLS, QUERIES

pytestmark = pytest.mark.integration


def test_the_floor_is_fitted_on_the_labelled_prompts_and_judged_on_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, rows in (("memories", MEMORIES), ("queries", QUERIES), ("null_queries", NULLS)):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    logged: list[str] = []
    result = retrieval_calibrate.run_calibration(data_dir=tmp_path, log=logged.append)
    assert logged and "collecting evidence" in logged[0]
    topic_nulls = sum(1 for n in NULLS if n["category"] != "meta")
    assert result["samples"] == {"graded": len(QUERIES), "nulls": topic_nulls, "meta_prompts": len(NULLS) - topic_nulls}
    assert result["fitted_in_sample"]["recall_loss"] <= abstain_calibration.DEFAULT_BUDGET
    assert result["cross_validation"]["folds"] == abstain_calibration.FOLDS
    abstain_calibration.print_report(result)
    assert "cross-validation" in capsys.readouterr().out
