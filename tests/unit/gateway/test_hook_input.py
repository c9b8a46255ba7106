"""Request bodies the gateway reads (issue 10, findings 7 and 8): deep nesting is a 400, invalid Unicode is
replaced, and the sub-command that ran decides the event."""

from __future__ import annotations

import json

import pytest

from ctxbus.gateway.hook_input import REPLACEMENT, clean_strings, clean_text, event_of, parse_object
from ctxbus.gateway.http import HttpError


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001, "nested too deeply"),
        (b"{not json", "not JSON"),
        (b"", "must be a JSON object"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_bodies_are_400s(body: bytes, message: str) -> None:
    with pytest.raises(HttpError) as caught:
        parse_object(body, "hook input")
    assert caught.value.status == 400 and message in str(caught.value)


def test_invalid_utf8_and_lone_surrogates_are_replaced() -> None:
    data = parse_object(b'{"prompt": "fix \xff\xfe it \\ud800 now", "x": [{"y": "\\udfff"}], "n": 1}', "hook input")
    assert clean_strings(data) == 2
    assert data["prompt"] == f"fix {REPLACEMENT}{REPLACEMENT} it {REPLACEMENT} now"
    assert data["x"] == [{"y": REPLACEMENT}] and data["n"] == 1
    json.dumps(data).encode("utf-8")  # encodable now
    assert data["prompt"].encode("utf-8")
    assert clean_text("plain") == "plain" and clean_text("é😀") == "é😀"


def test_deeply_nested_strings_are_cleaned_without_recursion() -> None:
    data: dict[str, object] = {"v": "\ud800"}
    node = data
    for _ in range(5_000):
        child: dict[str, object] = {"v": "\udc00"}
        node["c"] = child
        node = child
    assert clean_strings(data) == 5_001


def test_the_sub_command_that_ran_decides() -> None:
    assert event_of({"hook_event_name": "Stop"}, "UserPromptSubmit") == "UserPromptSubmit"
    assert event_of({"hook_event_name": "Stop"}, None) == "Stop"  # the http hook type sends only the body
    assert event_of({}, "SessionStart") == "SessionStart"
    assert event_of({"hook_event_name": 3}, None) is None
    assert event_of({}, None) is None
