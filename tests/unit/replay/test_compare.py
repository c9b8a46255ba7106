"""Backtest comparisons: overlap, rank changes, token deltas, and how failed and successful sessions' items move."""

from __future__ import annotations

import pytest

from ctxbus.replay.compare import Injection, RequestComparison, jaccard, rank_changes, summarise, verdict


def comparison(
    before: tuple[str, ...], after: tuple[str, ...], outcome: str | None = None, tokens: tuple[int, int] = (100, 100)
) -> RequestComparison:
    return RequestComparison(
        correlation_id="c",
        project="p",
        session_id="s",
        agent="a",
        prompt="q",
        outcome=outcome,
        before=Injection(before, tokens[0], "implementer"),
        after=Injection(after, tokens[1], "planner"),
    )


def test_jaccard() -> None:
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], []) == 0.0
    assert jaccard(["a", "b"], ["b", "a"]) == 1.0


def test_rank_changes_count_positions_moved_up() -> None:
    assert rank_changes(["a", "b", "c"], ["c", "a", "x"]) == {"a": -1, "c": 2}


def test_one_request() -> None:
    c = comparison(("a", "b", "c", "d"), ("c", "a", "e"), tokens=(400, 250))
    assert c.kept == ("a", "c") and c.dropped == ("b", "d") and c.added == ("e",)
    assert c.token_delta == -150 and not c.unchanged
    assert c.moves() == {"demoted": 1, "promoted": 1, "dropped": 2, "added": 1}
    data = c.to_dict()
    assert data["jaccard"] == pytest.approx(2 / 5) and data["profile_after"] == "planner"
    assert comparison(("a",), ("a",)).unchanged


def test_the_summary_splits_moves_by_outcome() -> None:
    rows = [
        comparison(("bad1", "bad2", "keep"), ("keep", "new"), outcome="failed", tokens=(300, 200)),
        comparison(("good1", "good2"), ("good1", "good2"), outcome="successful"),
        comparison(("x",), (), outcome=None, tokens=(50, 0)),
    ]
    s = summarise(rows, failed={"rejected: boom": 1}, left_out={"over_limit": 4})
    assert s.requests == 3 and s.unchanged == 1 and s.empty_before == 0 and s.empty_after == 1
    assert s.mean_token_delta == pytest.approx((-100 + 0 - 50) / 3)
    assert s.median_jaccard == pytest.approx(0.25)
    f = s.by_outcome["failed"]
    assert (f.requests, f.items_before, f.moves["dropped"], f.moves["promoted"], f.moves["added"]) == (1, 3, 2, 1, 1)
    g = s.by_outcome["successful"]
    assert (g.moves["kept_same"], g.moves["dropped"]) == (2, 0)
    assert s.by_outcome["no_outcome"].moves["dropped"] == 1
    assert s.most_dropped[0] == ("bad1", 1) and s.failed == {"rejected: boom": 1}
    lines = verdict(s)
    assert any("moves away from what failed more" in line for line in lines)
    assert s.to_dict()["by_outcome"]["failed"]["dropped"] == 2


def test_a_setting_that_drops_what_succeeded_is_called_out() -> None:
    rows = [
        comparison(("f1", "f2"), ("f1", "f2"), outcome="failed"),
        comparison(("g1", "g2"), ("g3",), outcome="successful"),
    ]
    assert any("moves away from what succeeded" in line for line in verdict(summarise(rows)))


def test_no_comparisons() -> None:
    s = summarise([])
    assert s.requests == 0 and s.mean_jaccard is None and verdict(s) == []
