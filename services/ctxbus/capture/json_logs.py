"""Errors that a structured logger printed as JSON lines during a check (pure).

A test run of a service often says what failed only in its logger's line: pino (Fastify's) at level 50,
``{"level":50,…,"err":{"type":"DatabaseError","message":"…","code":"23P01"}}``; structlog, bunyan, winston and
zap with ``"level": "error"``; Cloud Logging's ``"severity": "ERROR"``. Such a line is read as what it says: the
error's type and code are identifiers, ``Type: message`` is the line that states it. Lines below error level are
not errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: a JSON object on a line of its own that says it is an error (the line is parsed only when this matches)
_ERROR_LEVEL = re.compile(
    r'^\s*\{.*"(?:level|severity|log\.level|lvl)"\s*:\s*(?:[5-9]\d\b|"(?i:error|fatal|critical|crit|alert|emerg|panic)")'
)
#: a longer line is not parsed (a log line that long is a dump, and parsing it costs)
MAX_LINE_CHARS = 20_000
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.$-]{1,79}")
_CODE = re.compile(r"[A-Z0-9_.-]{2,40}|[A-Za-z]+[_-][\w-]{1,38}")
_MESSAGE_CHARS = 200


@dataclass(frozen=True, slots=True)
class LoggedError:
    #: where the line starts in the text
    start: int
    #: the error's type and code (identifier-shaped values only)
    identifiers: tuple[str, ...]
    #: ``Type: message`` (or the log message and the error, when the error is a string)
    statement: str


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _read(entry: dict[str, Any]) -> tuple[tuple[str, ...], str] | None:
    error = next((entry[k] for k in ("err", "error", "exception", "exc") if k in entry), None)
    said = _text(entry.get("msg") or entry.get("message") or entry.get("event"))
    ids: list[str] = []
    if isinstance(error, dict):
        kind = _text(error.get("type") or error.get("name") or error.get("class") or error.get("kind"))
        message = _text(error.get("message") or error.get("msg")) or said
        code = error.get("code")
        if _IDENTIFIER.fullmatch(kind):
            ids.append(kind)
        if isinstance(code, str | int) and _CODE.fullmatch(str(code)):
            ids.append(str(code))
        statement = f"{kind}: {message}" if kind and message else kind or message
    elif isinstance(error, str) and error.strip():
        name = error.strip()
        if _IDENTIFIER.fullmatch(name):
            ids.append(name)
        statement = f"{said}: {_text(name)}" if said else _text(name)
    else:
        statement = said
    return (tuple(ids), statement[:_MESSAGE_CHARS]) if statement else None


def logged_errors(text: str) -> Iterator[LoggedError]:
    """Every error-level JSON log line of ``text``, in order."""
    if '"' not in text:
        return
    start = 0
    for line in text.split("\n"):
        at, start = start, start + len(line) + 1
        if len(line) > MAX_LINE_CHARS or not _ERROR_LEVEL.match(line):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and (read := _read(entry)) is not None:
            yield LoggedError(at, *read)
