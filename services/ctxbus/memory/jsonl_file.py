"""JSON-lines memory files: one memory item per line.

Each line is an object with the caller's ``id`` (kept as is), ``kind``,
``content`` and optionally ``title``, ``domain`` (a string) and/or ``domains``
(a list), ``tags``, ``created_at``/``updated_at`` (ISO-8601; naive means UTC),
``confidence``, ``importance``, ``usage_count``, ``success_rate``,
``example_reference``, ``outcome``, ``key_insight``, ``lesson_learned``,
``session_id`` (learnings), ``severity`` (low/medium/high/critical) and
``mitigation`` (warnings), ``supersedes`` (a list of ids of this project that the
item replaces), ``source`` (default: the file path) and
``project`` (default: the caller's; ``"global"``/``"__global__"`` is the shared
scope). ``null`` for an optional key means "not given".

``kind`` is a :class:`MemoryKind` value or one of the aliases in
:data:`KIND_ALIASES`. Blank lines and lines starting with ``//`` are skipped.

A bad line (not JSON, not an object, an unknown or repeated key, a wrong type,
a value out of range, an id already used earlier in the file) is reported as a
:class:`LineError` and skipped; the other lines are kept. A file that cannot be
read is a :class:`MemoryFileError`.
"""

from __future__ import annotations

import difflib
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ctxbus.memory.model import GLOBAL_PROJECT, MAX_CONTENT_CHARS, MemoryItem, MemoryKind, Outcome, Severity
from ctxbus.memory.parse_result import LineError, ParsedMemories, read_text, validation_reason

#: Kind names from other tools, mapped onto ours.
KIND_ALIASES: Final[dict[str, MemoryKind]] = {
    "belief": MemoryKind.PRINCIPLE,
    "adr": MemoryKind.DECISION,
    "insight": MemoryKind.LEARNING,
    "session": MemoryKind.LEARNING,
}
#: ``project`` values that mean the scope shared by every project.
GLOBAL_ALIASES: Final = frozenset({"global", GLOBAL_PROJECT})
#: A line starting with this (after leading blanks) is a comment.
COMMENT_PREFIX: Final = "//"
#: Keys a line may have.
ALLOWED_KEYS: Final = frozenset(
    {
        "id",
        "kind",
        "content",
        "title",
        "domain",
        "domains",
        "tags",
        "created_at",
        "updated_at",
        "confidence",
        "importance",
        "usage_count",
        "success_rate",
        "example_reference",
        "outcome",
        "source",
        "project",
        "key_insight",
        "lesson_learned",
        "session_id",
        "severity",
        "mitigation",
        "supersedes",
    }
)
#: Longest value quoted back in a reason, in characters.
MAX_QUOTED_CHARS = 60

_VALID_KINDS = ", ".join(k.value for k in MemoryKind)
_VALID_ALIASES = ", ".join(KIND_ALIASES)
_VALID_OUTCOMES = ", ".join(o.value for o in Outcome)
_VALID_SEVERITIES = ", ".join(v.value for v in Severity)


class _DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (json would silently keep the last)."""


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(f"key {key!r} appears twice")
        result[key] = value
    return result


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 3] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_keys(raw: dict[str, Any]) -> None:
    unknown = sorted(set(raw) - ALLOWED_KEYS)
    if not unknown:
        return
    described = []
    for key in unknown:
        close = difflib.get_close_matches(key, ALLOWED_KEYS, n=1)
        described.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    noun = "key" if len(unknown) == 1 else "keys"
    raise ValueError(f"unknown {noun} {', '.join(described)}; allowed: {', '.join(sorted(ALLOWED_KEYS))}")


def _required_text(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    if value is None:
        raise ValueError(f"{key} is missing")
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {_quote(value)}")
    if not value.strip():
        raise ValueError(f"{key} is blank")
    return value


def _optional_text(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {_quote(value)}")
    return value


def _text_list(raw: dict[str, Any], key: str) -> list[str]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of strings, not {_quote(value)}")
    return value


def _fraction(raw: dict[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{key} must be a number from 0 to 1, not {_quote(value)}")
    return float(value)


def _count(raw: dict[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key} must be a whole number from 0 up, not {_quote(value)}")
    return value


def _time(raw: dict[str, Any], key: str) -> datetime | None:
    value = _optional_text(raw, key)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{key} must be an ISO-8601 time, not {_quote(value)}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _kind(raw: dict[str, Any]) -> MemoryKind:
    name = _required_text(raw, "kind").strip().lower()
    if name in KIND_ALIASES:
        return KIND_ALIASES[name]
    try:
        return MemoryKind(name)
    except ValueError:
        raise ValueError(
            f"kind {_quote(raw['kind'])} is not one of {_VALID_KINDS} (or the aliases {_VALID_ALIASES})"
        ) from None


def _outcome(raw: dict[str, Any]) -> Outcome | None:
    name = _optional_text(raw, "outcome")
    if name is None:
        return None
    try:
        return Outcome(name.strip().lower())
    except ValueError:
        raise ValueError(f"outcome {_quote(name)} is not one of {_VALID_OUTCOMES}") from None


def _severity(raw: dict[str, Any]) -> Severity | None:
    name = _optional_text(raw, "severity")
    if name is None:
        return None
    try:
        return Severity(name.strip().lower())
    except ValueError:
        raise ValueError(f"severity {_quote(name)} is not one of {_VALID_SEVERITIES}") from None


def _project(raw: dict[str, Any], default: str) -> str:
    if raw.get("project") is None:
        return default
    name = _required_text(raw, "project").strip()
    return GLOBAL_PROJECT if name.lower() in GLOBAL_ALIASES else name


def _times(raw: dict[str, Any], now: datetime | None) -> dict[str, datetime]:
    created, updated = _time(raw, "created_at"), _time(raw, "updated_at")
    created = created or updated or now
    updated = updated or created
    if created is None or updated is None:
        return {}  # the model's defaults
    if updated < created:
        raise ValueError(f"updated_at {updated.isoformat()} is before created_at {created.isoformat()}")
    return {"created_at": created, "updated_at": updated}


def memory_item(raw: Any, *, project: str, source: str, now: datetime | None = None) -> MemoryItem:
    """One decoded line -> MemoryItem; raises ValueError (or pydantic's ValidationError) with the reason."""
    if not isinstance(raw, dict):
        raise ValueError(f"a line must be a JSON object, not {type(raw).__name__}")
    _check_keys(raw)
    content = _required_text(raw, "content")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValueError(f"content has {len(content)} characters, over the {MAX_CONTENT_CHARS} limit")
    domain = _optional_text(raw, "domain")
    fields: dict[str, Any] = {
        "id": _required_text(raw, "id"),
        "project": _project(raw, project),
        "kind": _kind(raw),
        "title": _optional_text(raw, "title") or "",
        "content": content,
        "domains": ([domain] if domain else []) + _text_list(raw, "domains"),
        "tags": _text_list(raw, "tags"),
        "source": _optional_text(raw, "source") or source,
        "example_reference": _optional_text(raw, "example_reference"),
        "outcome": _outcome(raw),
        "key_insight": _optional_text(raw, "key_insight"),
        "lesson_learned": _optional_text(raw, "lesson_learned"),
        "session_id": _optional_text(raw, "session_id"),
        "severity": _severity(raw),
        "mitigation": _optional_text(raw, "mitigation"),
        "supersedes": _text_list(raw, "supersedes"),
        "success_rate": _fraction(raw, "success_rate"),
        **_times(raw, now),
    }
    for key in ("confidence", "importance"):
        value = _fraction(raw, key)
        if value is not None:
            fields[key] = value
    usage = _count(raw, "usage_count")
    if usage is not None:
        fields["usage_count"] = usage
    return MemoryItem.model_validate(fields)


def _raw_id(raw: Any) -> str | None:
    value = raw.get("id") if isinstance(raw, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


#: one decoder for every line (``json.loads`` with a hook would build a new one per call)
_DECODER = json.JSONDecoder(object_pairs_hook=_object_without_repeats)
#: the first characters a JSON value can have (json also reads NaN and Infinity)
_VALUE_STARTS = frozenset('{["-0123456789tfnNI')
_NOT_A_VALUE = "not valid JSON: Expecting value at column 1"


def _decode(line: str) -> Any:
    """The JSON of one (stripped) line; ValueError with json's reason when it is not JSON or nests too deeply."""
    if line[:1] not in _VALUE_STARTS:  # json's own answer, without building an exception per junk line
        raise ValueError(_NOT_A_VALUE)
    try:
        return _DECODER.decode(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None


def parse_jsonl_text(text: str, *, path: Path, project: str, now: datetime | None = None) -> ParsedMemories:
    """JSON-lines text -> items (in file order) and per-line errors; ``path`` is the items' default source."""
    source = str(path)
    items: list[MemoryItem] = []
    errors: list[LineError] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIX):
            continue
        raw: Any = None
        try:
            raw = _decode(stripped)
            item = memory_item(raw, project=project, source=source, now=now)
        except ValidationError as exc:
            errors.append(LineError(number, _raw_id(raw), validation_reason(exc), source))
            continue
        except ValueError as exc:
            errors.append(LineError(number, _raw_id(raw), str(exc), source))
            continue
        if item.id in first_line:
            reason = f"duplicate id {item.id!r} (first at line {first_line[item.id]}, which is kept)"
            errors.append(LineError(number, item.id, reason, source))
            continue
        first_line[item.id] = number
        items.append(item)
    return ParsedMemories(items, errors)


def parse_jsonl(path: Path, *, project: str, now: datetime | None = None) -> ParsedMemories:
    """Read and parse one JSON-lines memory file (see :func:`parse_jsonl_text`).

    ``now`` dates the items that carry no time of their own (else the model's default).
    Raises MemoryFileError when the file cannot be read or is not UTF-8.
    """
    return parse_jsonl_text(read_text(path), path=path, project=project, now=now)
