"""Seed 002's SessionEnd update: what ctxbus learned, written back to the project's learned-pattern file (pure).

Opt-in (``CTXBUS_CAPTURE_WRITE_PATTERNS=1``). The file is the user's: :func:`updated_text` edits its text, never
re-serialises it, so every byte of the user's own patterns (and of anything else in the file) stays as it was:

- a learned item becomes a pattern (``pattern_id`` ``ctxbus-<item id>``, seed 002's fields: :func:`pattern_of`);
- a pattern ctxbus wrote before (``"written_by": "ctxbus"``) is replaced in place when the item changed;
- a new one is appended at the end of the ``patterns`` array, indented like the array's first element;
- a user's pattern is never touched, even one whose id a learned item would take (that item is left out);
- ``last_updated`` gets the time of the update when the file has a string there.

A file that is not a JSON object with a ``patterns`` array is refused (:class:`WritebackError`): nothing is
written over a file ctxbus cannot read. The caller writes the result atomically (a temporary file replaced).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ctxbus.memory.model import MemoryItem

#: the ids of the patterns ctxbus writes start with this
WRITTEN_PREFIX = "ctxbus-"
#: and they carry this field, so that ctxbus replaces only what it wrote (a user's id may start the same way)
WRITTEN_BY = ("written_by", "ctxbus")
_DECODER = json.JSONDecoder()
_BLANK = " \t\r\n"


class WritebackError(ValueError):
    """The pattern file cannot be updated without rewriting what ctxbus cannot read."""


def pattern_of(item: MemoryItem) -> dict[str, Any]:
    """A learned item as a seed 002 pattern."""
    pattern: dict[str, Any] = {
        "pattern_id": f"{WRITTEN_PREFIX}{item.id}",
        "domain": item.domains[0] if item.domains else "general",
        "title": item.title or item.content.split("\n", 1)[0][:120],
        "description": item.content,
        "confidence": round(item.confidence, 4),
        "usage_count": item.occurrences,
    }
    if item.success_rate is not None:
        pattern["success_rate"] = round(item.success_rate, 4)
    if item.files:
        pattern["example_reference"] = item.files[0].path
    pattern[WRITTEN_BY[0]] = WRITTEN_BY[1]
    return pattern


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _BLANK:
        at += 1
    return at


def _expect(text: str, at: int, char: str) -> int:
    at = _skip(text, at)
    if at >= len(text) or text[at] != char:
        raise WritebackError(f"expected {char!r} at character {at}")
    return at + 1


def _members(text: str, start: int) -> dict[str, _Span]:
    """The value spans of the object opening at ``start``, by key."""
    at = _expect(text, start, "{")
    spans: dict[str, _Span] = {}
    if text[_skip(text, at)] == "}":
        return spans
    while True:
        key, at = _DECODER.raw_decode(text, _skip(text, at))
        at = _expect(text, at, ":")
        value_start = _skip(text, at)
        _, at = _DECODER.raw_decode(text, value_start)
        spans[str(key)] = _Span(value_start, at)
        at = _skip(text, at)
        if text[at] == "}":
            return spans
        at = _expect(text, at, ",")


def _elements(text: str, span: _Span) -> list[_Span]:
    """The element spans of the array at ``span``."""
    at = _skip(text, span.start + 1)
    found: list[_Span] = []
    if text[at] == "]":
        return found
    while True:
        start = _skip(text, at)
        _, at = _DECODER.raw_decode(text, start)
        found.append(_Span(start, at))
        at = _skip(text, at)
        if text[at] == "]":
            return found
        at = _expect(text, at, ",")


def _indent_of(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    prefix = text[line_start:at]
    return prefix if not prefix.strip() else ""


def _render(pattern: dict[str, Any], indent: str) -> str:
    """The pattern as a JSON object whose lines after the first start with ``indent`` (two spaces a level)."""
    return json.dumps(pattern, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def new_file(patterns: Sequence[dict[str, Any]], now: datetime) -> str:
    """A pattern file holding only ``patterns`` (there was none)."""
    document = {"version": "1.0.0", "last_updated": now.isoformat(), "patterns": list(patterns)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def updated_text(text: str | None, patterns: Sequence[dict[str, Any]], now: datetime) -> str:
    """``text`` (a pattern file, None or blank: none yet) with ``patterns`` written in (see the module docs)."""
    if text is None or not text.strip():
        return new_file(patterns, now)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise WritebackError(f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("patterns"), list):
        raise WritebackError("not a learned-patterns file: no top-level object with a 'patterns' list")
    members = _members(text, _skip(text, 0))
    elements = _elements(text, members["patterns"])
    existing = [e if isinstance(e, dict) else {} for e in document["patterns"]]
    by_id = {e.get("pattern_id"): (span, e) for e, span in zip(existing, elements, strict=True)}
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), applied from the end
    first = elements[0] if elements else None
    indent = _indent_of(text, first.start) if first else _indent_of(text, members["patterns"].start) + "  "
    appended: list[str] = []
    for pattern in patterns:
        pid = pattern["pattern_id"]
        found = by_id.get(pid)
        if found is not None:
            span, element = found
            if element.get(WRITTEN_BY[0]) == WRITTEN_BY[1]:
                edits.append((span.start, span.end, _render(pattern, indent)))
            continue  # the user's pattern of that id stays as it is
        appended.append(_render(pattern, indent))
    if appended:
        array = members["patterns"]
        if elements:
            last = elements[-1]
            edits.append((last.end, last.end, "".join(f",\n{indent}{p}" for p in appended)))
        else:
            closing = _indent_of(text, array.start)
            body = ",\n".join(f"{indent}{p}" for p in appended)
            edits.append((array.start, array.end, f"[\n{body}\n{closing}]"))
    updated = members.get("last_updated")
    if updated is not None and isinstance(document.get("last_updated"), str):
        edits.append((updated.start, updated.end, json.dumps(now.isoformat())))
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + replacement + text[end:]
    return text
