"""`ctxbus bench outcomes` and `ctxbus hooks install` (the PostToolUse hook), in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.bench.outcomes import DEFAULT_DIR, load_labels
from ctxbus.cli.main import main


def test_the_labelled_set_is_complete_and_shipped_consistently() -> None:
    labels = load_labels()
    files = sorted(p.name for p in DEFAULT_DIR.glob("*.jsonl") if p.name != "labels.jsonl")
    assert sorted(label["file"] for label in labels) == files and len(files) >= 60
    assert {label["outcome"] for label in labels} == {"successful", "partial", "failed", "unknown"}
    assert {label["set"] for label in labels} == {"A", "B"}


def test_bench_outcomes_prints_accuracy_per_outcome_and_the_confusion_matrix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "outcomes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["transcripts"] == len(load_labels())
    assert set(result["per_outcome"]) == {"successful", "partial", "failed", "unknown"}
    confusion = result["confusion"]
    assert sum(sum(row.values()) for row in confusion.values()) == result["transcripts"]
    correct = sum(confusion[o][o] for o in confusion)
    assert result["accuracy"] == pytest.approx(correct / result["transcripts"])
    assert len(result["errors"]) == result["transcripts"] - correct
    assert main(["bench", "outcomes"]) == 0
    report = capsys.readouterr().out
    assert "accuracy" in report and "confusion (rows: label, columns: inferred)" in report and "per set: A" in report


def test_a_broken_labels_file_is_a_clear_error(tmp_path: Path) -> None:
    from ctxbus.bench import outcomes

    (tmp_path / "labels.jsonl").write_text('{"file": "missing.jsonl", "outcome": "failed"}\n')
    with pytest.raises(ValueError, match=r"no transcript missing\.jsonl"):
        outcomes.load_labels(tmp_path)
    (tmp_path / "labels.jsonl").write_text('{"file": "x.jsonl", "outcome": "great"}\n')
    with pytest.raises(ValueError, match=r"labels\.jsonl:1"):
        outcomes.load_labels(tmp_path)


def test_hooks_install_adds_post_tool_use_for_bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model": "opus"}))
    assert main(["hooks", "install", "--settings-file", str(path)]) == 0
    installed = json.loads(path.read_text())
    (group,) = installed["hooks"]["PostToolUse"]
    # Bash for the checks the outcome inference reads; the edits for session capture (the fix after a failure)
    assert group["matcher"] == "Bash|Edit|Write|MultiEdit"
    assert group["hooks"][0]["command"].endswith("launch.py post-tool-use")
    assert "PostToolUseFailure" not in installed["hooks"]
    assert main(["hooks", "install", "--settings-file", str(path), "--tool-failures"]) == 0
    assert "PostToolUseFailure" in json.loads(path.read_text())["hooks"]
    assert main(["hooks", "uninstall", "--settings-file", str(path)]) == 0
    assert json.loads(path.read_text()) == {"model": "opus"}
