"""What the hook client adds to its POST (the secret, its project and cwd) and how it trims an input too large
to post (issue 10, findings 4, 5 and 7)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from ctxbus.hooks import oversize
from ctxbus.hooks.wire import SECRET_FILE, client_headers, encode_value, read_secret


def test_the_secret_comes_from_the_environment_else_the_data_dir(tmp_path: Path) -> None:
    assert read_secret({}, str(tmp_path)) is None
    (tmp_path / SECRET_FILE).write_text("from-file\n")
    assert read_secret({}, str(tmp_path)) == "from-file"
    assert read_secret({"CTXBUS_GATEWAY_SECRET": " from-env "}, str(tmp_path)) == "from-env"
    (tmp_path / SECRET_FILE).write_text("")
    assert read_secret({}, str(tmp_path)) is None
    (tmp_path / SECRET_FILE).write_text("x" * 5_000)  # not a secret ctxbus wrote
    assert read_secret({}, str(tmp_path)) is None


def test_header_values_are_percent_encoded_utf8() -> None:
    for text in ("/home/ann/acme web", "/tmp/r é/ü", "team/proj%41", "a\r\nX-Evil: 1", "\ud800"):
        encoded = encode_value(text)
        assert encoded.isascii() and "\r" not in encoded and "\n" not in encoded and " " not in encoded
        if text != "\ud800":
            assert unquote(encoded) == text
    assert encode_value("acme/web") == "acme/web"


def test_client_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "répo"
    here.mkdir()
    monkeypatch.chdir(here)
    (tmp_path / SECRET_FILE).write_text("abc123\n")
    lines = client_headers({"CTXBUS_PROJECT": "acme/wéb"}, str(tmp_path)).split("\r\n")
    assert lines[0] == "Authorization: Bearer abc123"
    assert lines[1] == "X-Ctxbus-Project: acme/w%C3%A9b"
    assert unquote(lines[2].split(": ", 1)[1]) == str(here) and lines[3] == ""
    only_cwd = client_headers({}, str(tmp_path / "none"))
    assert only_cwd.startswith("X-Ctxbus-Cwd: ") and only_cwd.endswith("\r\n")
    long = client_headers({"CTXBUS_PROJECT": "p" * 300}, str(tmp_path / "none"))
    assert len(long.split("\r\n")[0]) == len("X-Ctxbus-Project: ") + 200


# --- oversize input -----------------------------------------------------------------------------------------


def hook_input(prompt: str, **extra: object) -> bytes:
    return json.dumps(
        {"session_id": "s", "cwd": "/w", "hook_event_name": "UserPromptSubmit", "prompt": prompt, **extra}
    ).encode()


def test_a_complete_input_has_its_prompt_trimmed() -> None:
    data = oversize.parse(hook_input("é" * 300_000, after="kept"), cut=False)
    assert oversize.trim_prompt(data) == 300_000
    assert data["prompt"] == "é" * oversize.MAX_PROMPT_CHARS and data["after"] == "kept"
    assert oversize.trim_prompt(data) is None  # fits now


@pytest.mark.parametrize("cut_at", [-1, -2, -3, -5, -7, -100])
def test_an_input_cut_mid_prompt_is_closed_there(cut_at: int) -> None:
    raw = hook_input('a\\b\u00e9\ud83d\ude00\n"q" ' * 50_000)
    data = oversize.parse(raw[:cut_at], cut=True)
    assert data["session_id"] == "s" and data["cwd"] == "/w"
    assert data["prompt"].startswith('a\\bé😀\n"q" ')
    oversize.trim_prompt(data)
    assert oversize.MAX_PROMPT_CHARS // 2 < len(data["prompt"]) <= oversize.MAX_PROMPT_CHARS


def test_an_input_cut_between_members_keeps_the_whole_ones() -> None:
    raw = hook_input("short", tail="x" * 10)
    assert oversize.parse(raw[: raw.index(b'"tail"') + 3], cut=True) == json.loads(hook_input("short"))
    assert oversize.salvage('{"a": [1, 2') == {}
    assert oversize.salvage('{"a": 1, "b": tru') == {"a": 1}


@pytest.mark.parametrize("raw", [b"", b"[1, 2", b"nope", b"\xff\xfe"])
def test_what_is_no_object_is_an_input_error(raw: bytes) -> None:
    with pytest.raises(oversize.InputError):
        oversize.parse(raw, cut=True)
    with pytest.raises(oversize.InputError):
        oversize.parse(raw, cut=False)


def test_deep_nesting_is_an_input_error_not_a_recursion_error() -> None:
    with pytest.raises(oversize.InputError, match="nested"):
        oversize.parse(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", cut=False)
    assert oversize.parse(b'{"s": "x", "a": ' + b"[" * 100_000, cut=True) == {"s": "x"}
