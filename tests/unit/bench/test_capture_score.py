"""How ``ctxbus bench capture`` judges captured items against labelled lessons."""

from __future__ import annotations

import pytest

from ctxbus.bench.capture_score import Lesson, score_session
from ctxbus.memory.model import CAPTURED_SOURCE, MemoryItem, Provenance


def item(item_id: str, rule: str, content: str) -> MemoryItem:
    return MemoryItem(
        id=item_id,
        project="p",
        kind="learning",
        content=content,
        source=CAPTURED_SOURCE,
        provenance=Provenance(session_id="s", rule=rule),
    )


FIX = Lesson("p#1", "failure_fix", ("TokenExpired", "reset.py"))
EPISODE = Lesson("p#2", "episode", ("reset.py",))


def test_an_item_is_correct_when_it_holds_a_compatible_lesson() -> None:
    fix = item("a", "failure_fix", "tokenexpired fixed in app/RESET.py")
    episode = item("b", "episode", "Task: reset links. Changed: app/reset.py")
    score = score_session("f", [episode, fix], [FIX, EPISODE], [])
    assert (score.correct, score.recalled) == (2, 2) and score.holders == {"p#1": "a", "p#2": "b"}


def test_a_kind_that_does_not_fit_or_a_missing_mention_is_wrong() -> None:
    score = score_session(
        "f", [item("a", "episode", "TokenExpired reset.py"), item("b", "failure_fix", "reset.py")], [FIX], []
    )
    assert score.correct == 0 and score.missed == ("p#1",) and len(score.wrong) == 2


def test_a_second_item_of_the_same_lesson_is_not_correct() -> None:
    twice = [item("a", "failure_fix", "TokenExpired reset.py"), item("b", "failure_fix", "TokenExpired in reset.py")]
    score = score_session("f", twice, [FIX], [])
    assert (score.items, score.correct, score.recalled) == (2, 1, 1)


def test_the_matching_finds_the_pairing_that_order_would_miss() -> None:
    both = item("a", "correction", "use pnpm, never npm")
    one = item("b", "remember", "use pnpm")
    lessons = [Lesson("p#1", "correction", ("pnpm",)), Lesson("p#2", "remember", ("pnpm", "never"))]
    assert score_session("f", [both, one], lessons, []).correct == 2


def test_planted_secrets_are_counted_once_each() -> None:
    leaked = item("a", "remember", "the key is AKIAABCDEFGHIJKLMNOP, twice AKIAABCDEFGHIJKLMNOP")
    assert score_session("f", [leaked], [], ["AKIAABCDEFGHIJKLMNOP", "not-there"]).secrets_found == 1


def test_the_report_counts_only_the_targets_it_measured(capsys: pytest.CaptureFixture[str]) -> None:
    from ctxbus.bench.capture import print_report

    part = {
        "path": "p", "sessions": 1, "projects": 1, "items": 1, "correct": 1, "precision": 1.0,
        "precision_interval": None, "lessons": 1, "recalled": 1, "recall": 1.0, "recall_interval": None,
        "recall_by_kind": {}, "precision_by_rule": {}, "nothing_sessions": 0, "nothing_sessions_with_items": 0,
        "secrets_planted": 0, "secrets_stored": 0, "cpu_s_per_mb": 0.1, "cpu_s": 0.0, "transcript_mb": 0.0,
        "errors": [],
    }  # fmt: skip
    print_report({"heldout": part})
    assert "3 of 3 measured met (top 3 not measured)" in capsys.readouterr().out
