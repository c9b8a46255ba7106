"""Errors a JSON logger printed during a check (``ctxbus.capture.json_logs``)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxbus.capture.json_logs import MAX_LINE_CHARS, logged_errors


def test_levels_at_error_and_above_are_read_and_the_rest_are_not() -> None:
    lines = [
        {"level": 50, "err": {"type": "TypeError", "message": "Cannot read properties of undefined"}},
        {"level": 30, "err": {"type": "TypeError", "message": "logged at info"}},
        {"severity": "ERROR", "message": "quota exceeded", "error": {"name": "QuotaExceeded", "code": 429}},
        {"level": "warn", "error": "Deprecated"},
        {"lvl": "FATAL", "msg": "cannot bind", "error": "EADDRINUSE"},
    ]
    text = "noise\n" + "\n".join(json.dumps(line) for line in lines)
    found = list(logged_errors(text))
    assert [e.statement for e in found] == [
        "TypeError: Cannot read properties of undefined",
        "QuotaExceeded: quota exceeded",
        "cannot bind: EADDRINUSE",
    ]
    assert [e.identifiers for e in found] == [("TypeError",), ("QuotaExceeded", "429"), ("EADDRINUSE",)]
    assert all(text[e.start] == "{" for e in found)


def test_what_is_not_a_json_object_or_too_long_is_not_parsed() -> None:
    assert not list(logged_errors('{"level": 50, "msg": "cut off'))
    assert not list(logged_errors('[{"level": 50, "msg": "an array"}]'))
    long = json.dumps({"level": 50, "msg": "x" * MAX_LINE_CHARS})
    assert not list(logged_errors(long))


@given(st.text(alphabet=st.sampled_from(list('{}[]":,0123456789 levlrorEmsgt\n\\')), max_size=400))
def test_any_text_is_read_without_error(text: str) -> None:
    for error in logged_errors(text):
        assert error.start == 0 or text[error.start - 1] == "\n"
        assert len(error.statement) <= 200
