"""Seed 002's learned-patterns file: ``{"version", "last_updated", "patterns": [...]}``.

Each pattern (``pattern_id, domain, title, description, confidence, usage_count,
success_rate, example_reference``) becomes a ``MemoryItem`` of kind PATTERN:
id = pattern_id, content = description, domains = (domain,), source = the file
path, created_at = updated_at = the file's ``last_updated`` when it is a
readable ISO-8601 time (else ``now`` when given, else the model's default).

A bad pattern is reported (:class:`PatternError`: index, pattern_id if any,
reason, file) and skipped; the good ones are kept. A repeated pattern_id in one
file is reported and the first one kept. A file that cannot be read, is not
JSON or has no ``patterns`` list is a :class:`PatternFileError`.

The only I/O is reading the files named by the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.memory.parse_result import MemoryFileError, read_text, validation_reason


class PatternFileError(MemoryFileError):
    """The file as a whole cannot be read as a learned-patterns file."""


@dataclass(frozen=True, slots=True)
class PatternError:
    """One pattern that was skipped: its position, its id when it has one, why, and in which file."""

    index: int
    pattern_id: str | None
    reason: str
    path: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        who = f" ({self.pattern_id})" if self.pattern_id else ""
        return f"{where}pattern #{self.index}{who}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ParsedPatterns:
    """The patterns read (in file order) and the ones skipped."""

    items: list[MemoryItem]
    errors: list[PatternError]


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_json_types(raw: dict[str, Any]) -> None:
    """JSON types the model would otherwise coerce (``true`` as 1.0, ``"0.9"`` as 0.9) are refused."""
    if not _is_number(raw.get("confidence")):
        raise ValueError("confidence must be a number from 0 to 1")
    if raw.get("success_rate") is not None and not _is_number(raw["success_rate"]):
        raise ValueError("success_rate must be a number from 0 to 1 or null")
    usage = raw.get("usage_count", 0)
    if not isinstance(usage, int) or isinstance(usage, bool):
        raise ValueError("usage_count must be a whole number")
    if raw.get("domain") is not None and not isinstance(raw["domain"], str):
        raise ValueError("domain must be a string")


def pattern_item(raw: Any, *, project: str, source: str, updated: datetime | None) -> MemoryItem:
    """One pattern dict -> MemoryItem; raises ValueError (or pydantic's ValidationError) with the reason."""
    if not isinstance(raw, dict):
        raise ValueError(f"a pattern must be an object, not {type(raw).__name__}")
    pid = raw.get("pattern_id")
    if not isinstance(pid, str) or not pid.strip():
        raise ValueError("pattern_id is missing or blank")
    _check_json_types(raw)
    domain = raw.get("domain")
    fields: dict[str, Any] = {
        "id": pid,
        "project": project,
        "kind": MemoryKind.PATTERN,
        "title": raw.get("title") or "",
        "content": raw.get("description"),
        "domains": (domain,) if isinstance(domain, str) else (),
        "confidence": raw["confidence"],
        "usage_count": raw.get("usage_count", 0),
        "success_rate": raw.get("success_rate"),
        "example_reference": raw.get("example_reference"),
        "source": source,
    }
    if updated is not None:
        fields["created_at"] = fields["updated_at"] = updated
    return MemoryItem.model_validate(fields)


def _raw_id(raw: Any) -> str | None:
    pid = raw.get("pattern_id") if isinstance(raw, dict) else None
    return pid if isinstance(pid, str) and pid.strip() else None


def parse_patterns(document: Any, *, path: Path, project: str, now: datetime | None = None) -> ParsedPatterns:
    """A decoded learned-patterns document -> items and per-pattern errors.

    ``now`` dates the items when the document has no readable ``last_updated``.
    Raises PatternFileError when ``document`` is not an object with a ``patterns`` list.
    """
    if not isinstance(document, dict) or not isinstance(document.get("patterns"), list):
        raise PatternFileError(path, 'expected an object with a "patterns" list')
    updated = _timestamp(document.get("last_updated")) or now
    source = str(path)
    items: list[MemoryItem] = []
    errors: list[PatternError] = []
    first_index: dict[str, int] = {}
    for index, raw in enumerate(document["patterns"]):
        pid = _raw_id(raw)
        try:
            item = pattern_item(raw, project=project, source=source, updated=updated)
        except ValidationError as exc:
            errors.append(PatternError(index, pid, validation_reason(exc), source))
            continue
        except ValueError as exc:
            errors.append(PatternError(index, pid, str(exc), source))
            continue
        if item.id in first_index:
            reason = f"duplicate pattern_id (first at #{first_index[item.id]}, which is kept)"
            errors.append(PatternError(index, item.id, reason, source))
            continue
        first_index[item.id] = index
        items.append(item)
    return ParsedPatterns(items, errors)


def read_json(path: Path) -> Any:
    """The decoded JSON of ``path``; PatternFileError when it cannot be read or is not JSON."""
    try:
        text = read_text(path)
    except MemoryFileError as exc:
        raise PatternFileError(path, exc.reason) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PatternFileError(path, f"not valid JSON: {exc}") from exc
    except RecursionError:
        raise PatternFileError(path, "not valid JSON: nested too deeply") from None


def parse_pattern_file(path: Path, *, project: str, now: datetime | None = None) -> ParsedPatterns:
    """Read and parse one learned-patterns file (see :func:`parse_patterns`)."""
    return parse_patterns(read_json(path), path=path, project=project, now=now)


def merge_pattern_files(
    project_file: Path | None, home_file: Path | None, *, project: str, now: datetime | None = None
) -> ParsedPatterns:
    """The project file merged over the home file: same pattern_id, the project's wins.

    Items: the project file's, then the home file's not overridden. Errors: both
    files' (each names its file). A missing file (or None) contributes nothing;
    a file that exists but cannot be read raises PatternFileError. A project
    pattern that is invalid does not hide the home pattern of the same id.
    """
    merged: dict[str, MemoryItem] = {}
    errors: list[PatternError] = []
    for path in (project_file, home_file):
        if path is None or not path.exists():
            continue
        parsed = parse_pattern_file(path, project=project, now=now)
        errors.extend(parsed.errors)
        for item in parsed.items:
            merged.setdefault(item.id, item)
    return ParsedPatterns(list(merged.values()), errors)
