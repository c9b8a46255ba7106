"""What memory listings show: filters, rows with learned conviction, whole documents, a table clipped to width."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbus.core.learning import learned_conviction
from ctxbus.core.listing import (
    ItemFilter,
    ItemHistory,
    clip,
    conviction_move,
    document,
    row,
    select,
    session_change,
    table,
)
from ctxbus.memory.model import Feedback, MemoryItem

ITEMS = [
    MemoryItem(id="a", project="p", kind="pattern", content="alpha rule", source="Team Wiki", confidence=0.6),
    MemoryItem(id="b", project="p", kind="warning", content="beta\nmore", source="retro", pinned=True),
    MemoryItem(id="c", project="p", kind="pattern", content="gamma", superseded_by="a"),
]


def ids(keep: ItemFilter) -> list[str]:
    return [i.id for i in select(ITEMS, keep)]


def test_filters_keep_live_items_unless_asked_for_stale_ones() -> None:
    assert ids(ItemFilter()) == ["a", "b"]
    assert ids(ItemFilter(stale=True)) == ["c"]
    assert ids(ItemFilter(kind="pattern")) == ["a"]
    assert ids(ItemFilter(source="wiki")) == ["a"]  # a substring, any case
    assert ids(ItemFilter(pinned=True)) == ["b"] and ids(ItemFilter(pinned=False)) == ["a"]
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        ItemFilter(kind="nope")


def test_a_row_shows_the_conviction_ranking_sees_and_a_title_even_without_one() -> None:
    learned = ITEMS[0].model_copy(update={"feedback": Feedback(uses=2, successes=2)})
    r = row(learned)
    assert r["conviction"] > 0.6 and r["uses"] == 2 and r["title"] == "alpha rule"
    assert row(ITEMS[1])["title"] == "beta" and row(ITEMS[1])["pinned"] and row(ITEMS[2])["stale"]


def test_a_document_holds_outcomes_injections_and_near_copies() -> None:
    failed = ITEMS[0].model_copy(update={"feedback": Feedback(uses=3, successes=1, failures=2), "cluster_id": "a"})
    last = datetime(2026, 11, 27, 9, tzinfo=UTC)
    doc = document(failed, ItemHistory(5, last), [failed, ITEMS[2]])
    assert doc["outcomes"] == {"successful": 1, "partial": 0, "failed": 2, "rated": 3}
    assert doc["conviction"] < doc["imported_confidence"] == 0.6
    assert doc["injections"] == 5 and doc["last_injected"] == last.isoformat()
    assert doc["near_copies"] == ["c"] and doc["content"] == "alpha rule" and "feedback" not in doc


def test_the_table_fits_the_width_and_marks_pinned_and_stale_items() -> None:
    lines = table([row(i) for i in ITEMS], 60)
    assert lines[0].split() == ["ID", "KIND", "SOURCE", "CONV", "USES", "TITLE"]
    assert all(len(line) <= 60 for line in lines)
    assert lines[2].startswith("*b ") and lines[3].startswith("~c ")
    assert clip("a  long\ntext here", 8) == "a long …" and clip("short", 10) == "short" and clip("x", 0) == ""


def test_a_session_change_says_how_much_its_outcome_moved_each_items_conviction() -> None:
    at = datetime(2026, 11, 27, 9, tzinfo=UTC)
    failed_twice = ITEMS[0].model_copy(update={"feedback": Feedback(uses=2, failures=2)})
    untouched = ITEMS[1].model_copy(update={"feedback": Feedback(uses=1, successes=1)})
    change = session_change("p", "s-1", None, "failed", at, [untouched, failed_twice])
    assert (change["session_id"], change["outcome"], change["at"]) == ("s-1", "failed", at.isoformat())
    first, second = change["changed"]
    assert first["id"] == "a" and first["after"] < first["before"]  # the biggest move first
    assert second == {"id": "b", "project": "p", "before": second["after"], "after": second["after"]}
    assert conviction_move(failed_twice, "unknown") == (learned_conviction(failed_twice),) * 2
    pinned = failed_twice.model_copy(update={"pinned": True})
    assert conviction_move(pinned, "failed") == (0.6, 0.6)  # a pinned item is never lowered


def test_an_item_naming_a_deleted_file_is_stale_listed_with_why_and_still_live() -> None:
    marked = ITEMS[0].model_copy(update={"stale": "deleted: app/auth/reset.py"})
    assert ItemFilter(stale=True).keeps(marked) and ItemFilter().keeps(marked)  # still searched, down-weighted
    assert row(marked)["stale"] and row(marked)["stale_reason"] == "deleted: app/auth/reset.py"
    assert not row(ITEMS[0])["stale"] and row(ITEMS[0])["stale_reason"] is None
    (line,) = table([row(marked)], 200)[1:]
    assert line.startswith("~") and "[stale: deleted: app/auth/reset.py]" in line
