"""What ctxbus learned, written into the user's learned-pattern file: their own patterns byte-identical."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.memory.model import FileRef, MemoryItem, MemoryKind
from ctxbus.memory.pattern_writeback import WritebackError, pattern_of, updated_text

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
USER = """{
    "version": "1.0.0",
    "last_updated": "2026-01-26T12:00:00Z",
    "patterns": [
        {
            "pattern_id": "hook-graceful-exit",
            "domain": "hooks",
            "title": "Hook Graceful Exit Pattern",
            "description": "Always exit 0 from hook scripts,   even on errors.",
            "confidence": 0.95
        },
        {"pattern_id": "ctxbus-reset", "title": "the user's own, oddly named", "description": "kept"}
    ],
    "notes": "mine"
}
"""


def learned(item_id: str = "reset-flow", content: str = "The reset flow lives in app/auth/reset.py.") -> MemoryItem:
    return MemoryItem(
        id=item_id,
        project="acme/web",
        kind=MemoryKind.LEARNING,
        title="Where the reset flow lives",
        content=content,
        domains=("auth",),
        files=(FileRef(path="app/auth/reset.py"),),
        occurrences=2,
    )


def test_a_learned_pattern_is_appended_and_the_users_bytes_stay() -> None:
    out = updated_text(USER, [pattern_of(learned())], NOW)
    document = json.loads(out)
    assert [p["pattern_id"] for p in document["patterns"]] == [
        "hook-graceful-exit",
        "ctxbus-reset",
        "ctxbus-reset-flow",
    ]
    assert document["patterns"][2] == {
        "pattern_id": "ctxbus-reset-flow",
        "domain": "auth",
        "title": "Where the reset flow lives",
        "description": "The reset flow lives in app/auth/reset.py.",
        "confidence": 0.5,
        "usage_count": 2,
        "example_reference": "app/auth/reset.py",
        "written_by": "ctxbus",
    }
    head, tail = USER.split('    "last_updated"', 1)[0], USER.split("2026-01-26T12:00:00Z", 1)[1]
    user_patterns = tail.split("\n    ],")[0]
    assert out.startswith(head) and user_patterns in out  # every byte of the user's patterns
    assert document["last_updated"] == NOW.isoformat() and document["notes"] == "mine"
    assert '\n        {\n          "pattern_id": "ctxbus-reset-flow"' in out  # indented like its neighbours


def test_a_pattern_ctxbus_wrote_is_replaced_in_place_and_a_users_pattern_never() -> None:
    once = updated_text(USER, [pattern_of(learned())], NOW)
    twice = updated_text(once, [pattern_of(learned(content="It moved to app/auth/flows/reset.py."))], NOW)
    patterns = json.loads(twice)["patterns"]
    assert len(patterns) == 3 and patterns[2]["description"] == "It moved to app/auth/flows/reset.py."
    clash = updated_text(USER, [pattern_of(learned(item_id="reset"))], NOW)  # the user's "ctxbus-reset" stays
    assert json.loads(clash)["patterns"][1]["description"] == "kept"
    assert clash.replace(NOW.isoformat(), "2026-01-26T12:00:00Z") == USER


def test_no_file_yet_an_empty_array_and_a_file_ctxbus_cannot_read() -> None:
    fresh = json.loads(updated_text(None, [pattern_of(learned())], NOW))
    assert fresh["version"] == "1.0.0" and [p["pattern_id"] for p in fresh["patterns"]] == ["ctxbus-reset-flow"]
    empty = updated_text('{"patterns": []}', [pattern_of(learned())], NOW)
    assert json.loads(empty)["patterns"][0]["pattern_id"] == "ctxbus-reset-flow"
    for broken in ("{not json", "[]", '{"patterns": {}}'):
        with pytest.raises(WritebackError):
            updated_text(broken, [pattern_of(learned())], NOW)


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=4, unique=True), st.sampled_from([0, 2, 4]))
def test_any_user_file_keeps_its_patterns_and_gains_the_learned_ones(ids: list[str], indent: int) -> None:
    user = {"version": "1", "patterns": [{"pattern_id": i, "description": "d"} for i in ids]}
    text = json.dumps(user, indent=indent or None)
    out = json.loads(updated_text(text, [pattern_of(learned())], NOW))
    assert out["patterns"][: len(ids)] == user["patterns"]
    assert out["patterns"][-1]["pattern_id"] == "ctxbus-reset-flow" or "ctxbus-reset-flow" in ids
