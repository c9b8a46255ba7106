"""Hook input too large to post as it is (slow path of the hook client; standard library only).

Claude Code may hand a hook a prompt of many megabytes. The client reads at most ``MAX_READ_BYTES`` of it; an
input of ``MAX_INPUT_BYTES`` or more is parsed and its prompt trimmed to its first ``MAX_PROMPT_CHARS``
characters before posting (the gateway reads no more of a prompt anyway). An input cut by the read limit is
not valid JSON: its members are read up to the cut, and a string the cut went through (the prompt) is closed
there, so the hook still posts a trimmed prompt, never half a JSON document.
"""

from __future__ import annotations

import json
from typing import Any

#: a hook input this large or larger is trimmed before posting
MAX_INPUT_BYTES = 4_000_000
#: the most the client reads of its standard input
MAX_READ_BYTES = 16_000_000
MAX_PROMPT_CHARS = 100_000
#: an escape sequence is at most this long (``\\uXXXX``)
_ESCAPE_CHARS = 6
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class InputError(ValueError):
    """Hook input that is no JSON object (and no prefix of one)."""


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _open_string(text: str, at: int, max_chars: int) -> str | None:
    """The characters of a string starting at ``at`` whose closing quote was cut off (at most ``max_chars``)."""
    body = text[at : at + 1 + max_chars * _ESCAPE_CHARS]
    for drop in range(_ESCAPE_CHARS + 1):  # an escape the cut went through is left out
        try:
            value = json.loads(body[: len(body) - drop] + '"')
        except ValueError:
            continue
        return value[:max_chars] if isinstance(value, str) else None
    return None


def salvage(text: str, max_chars: int = MAX_PROMPT_CHARS) -> dict[str, Any]:
    """The members of a JSON object cut short, up to the cut; a string value the cut went through is kept closed."""
    at = _skip(text, 0)
    if not text.startswith("{", at):
        raise InputError("hook input is not a JSON object")
    at += 1
    data: dict[str, Any] = {}
    while True:
        at = _skip(text, at)
        if text.startswith("}", at) or at >= len(text):
            return data
        try:
            key, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return data
        at = _skip(text, at)
        if not isinstance(key, str) or not text.startswith(":", at):
            return data
        at = _skip(text, at + 1)
        try:
            value, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            if text.startswith('"', at):
                partial = _open_string(text, at, max_chars)
                if partial is not None:
                    data[key] = partial
            return data
        data[key] = value
        at = _skip(text, at)
        if not text.startswith(",", at):
            return data
        at += 1


def parse(raw: bytes, *, cut: bool) -> dict[str, Any]:
    """The hook input (``cut``: the read limit cut it, so a prefix is read); InputError when it is none."""
    text = raw.decode("utf-8", "replace")
    if cut:
        return salvage(text)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"hook input is not JSON: {exc}") from None
    except RecursionError:
        raise InputError("hook input is nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError("hook input is not a JSON object")
    return data


def trim_prompt(data: dict[str, Any], max_chars: int = MAX_PROMPT_CHARS) -> int | None:
    """Cut a prompt longer than ``max_chars`` to its first ``max_chars``; its length before, or None if it fit."""
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or len(prompt) <= max_chars:
        return None
    data["prompt"] = prompt[:max_chars]
    return len(prompt)
