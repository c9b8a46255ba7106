"""ctxbus's server in a project's ``.mcp.json`` (Claude Code's ``{"mcpServers": {NAME: {"command", "args"}}}``), and
out again: pure text work that leaves every other byte of the file as it was.

The file is read as JSON to know what it holds, and edited as text where ctxbus's entry goes: after the last server
(indented like the others), in place of an older ctxbus entry, or as a new ``"mcpServers"`` member. The result is
parsed back and must equal the intended document; a file whose text defeats the splice (never seen in practice) is
written whole in its own indent instead (:func:`ctxbus.hooks.settings_text.dumps_like`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from ctxbus.hooks.settings_text import detect_indent, dumps_like

SERVERS = "mcpServers"
#: the name ctxbus's entry has under ``mcpServers``
NAME = "ctxbus"
_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


class McpFileError(ValueError):
    """A ``.mcp.json`` whose shape ctxbus will not edit."""


def server_entry(command: str, args: list[str]) -> dict[str, Any]:
    """A stdio server's entry as Claude Code reads it."""
    return {"command": command, "args": list(args)}


@dataclass(frozen=True, slots=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _members(text: str, brace: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is at ``brace``, and the index of its ``}``."""
    members: list[_Member] = []
    i = _skip(text, brace + 1)
    if text[i] == "}":
        return members, i
    while True:
        key, after_key = _DECODER.raw_decode(text, i)
        colon = _skip(text, after_key)
        if text[colon] != ":":
            raise ValueError("expected ':'")
        value_start = _skip(text, colon + 1)
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(str(key), i, value_start, value_end))
        i = _skip(text, value_end)
        if text[i] == "}":
            return members, i
        if text[i] != ",":
            raise ValueError("expected ',' or '}'")
        i = _skip(text, i + 1)


def _line_indent(text: str, at: int) -> str:
    """The whitespace that starts the line ``at`` is on."""
    start = text.rfind("\n", 0, at) + 1
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _unit(text: str) -> str:
    indent = detect_indent(text)
    return indent if isinstance(indent, str) else " " * indent


def _render(value: Any, indent: str, unit: str, inline: bool) -> str:
    """``value`` as JSON: on one line when the file's objects are written on one line, else indented by ``unit``
    with its continuation lines at ``indent``."""
    if inline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert_member(text: str, brace: int, name: str, value: Any) -> str:
    """``text`` with ``"name": value`` added as the last member of the object at ``brace``."""
    members, close = _members(text, brace)
    unit = _unit(text)
    if members:
        last = members[-1]
        before_key = text[: last.key_start]
        lead = before_key[len(before_key.rstrip(_WS)) :]  # the whitespace the members start with
        inline = "\n" not in lead
        indent = _line_indent(text, last.key_start) if not inline else ""
        member = f"{json.dumps(name, ensure_ascii=False)}: {_render(value, indent, unit, inline)}"
        return text[: last.value_end] + "," + lead + member + text[last.value_end :]
    outer = _line_indent(text, brace)
    indent = outer + unit
    member = f"{json.dumps(name, ensure_ascii=False)}: {_render(value, indent, unit, False)}"
    return text[: brace + 1] + "\n" + indent + member + "\n" + outer + text[close:]


def _spliced(text: str, name: str, entry: dict[str, Any]) -> str:
    start = _skip(text, 1 if text.startswith("\ufeff") else 0)
    top, _ = _members(text, start)
    servers = next((m for m in top if m.key == SERVERS), None)
    if servers is None:
        return _insert_member(text, start, SERVERS, {name: entry})
    inner, _ = _members(text, servers.value_start)
    ours = next((m for m in inner if m.key == name), None)
    if ours is None:
        return _insert_member(text, servers.value_start, name, entry)
    inline = "\n" not in text[servers.value_start : ours.key_start]
    rendered = _render(entry, _line_indent(text, ours.key_start), _unit(text), inline)
    return text[: ours.value_start] + rendered + text[ours.value_end :]


def _cut(text: str, name: str) -> str:
    start = _skip(text, 1 if text.startswith("\ufeff") else 0)
    top, _ = _members(text, start)
    servers = next(m for m in top if m.key == SERVERS)
    inner, close = _members(text, servers.value_start)
    index = next(i for i, m in enumerate(inner) if m.key == name)
    ours = inner[index]
    if len(inner) == 1:  # the only server: the object is left empty, as it was before there were any
        return text[: servers.value_start + 1] + text[close:]
    if index == 0:  # the first: up to the next member's key
        return text[: ours.key_start] + text[inner[1].key_start :]
    return text[: inner[index - 1].value_end] + text[ours.value_end :]


def parse(text: str | None, where: str) -> dict[str, Any]:
    """The file's document ({} for no file or a blank one); McpFileError for one ctxbus will not edit."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text.lstrip("\ufeff"))
    except ValueError as exc:
        raise McpFileError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise McpFileError(f"{where}: not a JSON object")
    if SERVERS in data and not isinstance(data[SERVERS], dict):
        raise McpFileError(f'{where}: "{SERVERS}" is not an object')
    return data


def with_server(text: str | None, entry: dict[str, Any], *, name: str = NAME, where: str = ".mcp.json") -> str:
    """The file's text (None: there is no file, and a new one is made) with ``name``'s entry set to ``entry``; the
    same text when the entry is there already."""
    data = parse(text, where)
    if data.get(SERVERS, {}).get(name) == entry and text is not None:
        return text
    wanted = copy.deepcopy(data)
    wanted.setdefault(SERVERS, {})[name] = entry
    if text is None or not text.strip():
        return dumps_like(wanted, None)
    return _checked(lambda: _spliced(text, name, entry), wanted, text)


def without_server(text: str | None, *, name: str = NAME, where: str = ".mcp.json") -> str | None:
    """The file's text without ``name``'s entry (the same text when it has none; None when there is no file)."""
    if text is None:
        return None
    data = parse(text, where)
    if name not in data.get(SERVERS, {}):
        return text
    wanted = copy.deepcopy(data)
    del wanted[SERVERS][name]
    return _checked(lambda: _cut(text, name), wanted, text)


def _checked(splice: Any, wanted: dict[str, Any], original: str) -> str:
    """The spliced text when it parses back to ``wanted``, else the document written whole like ``original``."""
    try:
        result: str = splice()
        if json.loads(result.lstrip("\ufeff")) == wanted:
            return result
    except (ValueError, IndexError, StopIteration):
        pass
    return dumps_like(wanted, original)
