"""Seed 002's learned-patterns file: ``{"version", "last_updated", "patterns": [...]}``.

Each pattern becomes a ``MemoryItem`` of kind PATTERN. A bad pattern is reported
(index, id, reason) and skipped; the good ones are kept. A file that is not JSON
or has no ``patterns`` list is a :class:`PatternFileError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ctxbus.memory.model import MemoryItem, MemoryKind

#: Largest pattern file read, in bytes.
MAX_FILE_BYTES = 20_000_000


class PatternFileError(ValueError):
    """The file as a whole cannot be read as a learned-patterns file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class PatternError:
    index: int
    pattern_id: str | None
    reason: str

    def __str__(self) -> str:
        who = f" ({self.pattern_id})" if self.pattern_id else ""
        return f"pattern #{self.index}{who}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ParsedPatterns:
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


def _reason(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'pattern'}: {e['msg']}" for e in exc.errors()[:3])


def pattern_item(raw: Any, *, project: str, source: str, updated: datetime | None) -> MemoryItem:
    """One pattern dict -> MemoryItem; raises ValueError/ValidationError with the reason."""
    if not isinstance(raw, dict):
        raise ValueError(f"a pattern must be an object, not {type(raw).__name__}")
    pid = raw.get("pattern_id")
    if not isinstance(pid, str) or not pid.strip():
        raise ValueError("pattern_id is missing or blank")
    fields: dict[str, Any] = {
        "id": pid,
        "project": project,
        "kind": MemoryKind.PATTERN,
        "title": raw.get("title") or "",
        "content": raw.get("description"),
        "domains": (raw["domain"],) if isinstance(raw.get("domain"), str) else (),
        "confidence": raw.get("confidence"),
        "usage_count": raw.get("usage_count", 0),
        "success_rate": raw.get("success_rate"),
        "example_reference": raw.get("example_reference"),
        "source": source,
    }
    if updated is not None:
        fields["created_at"] = fields["updated_at"] = updated
    return MemoryItem.model_validate(fields)


def parse_patterns(document: Any, *, path: Path, project: str) -> ParsedPatterns:
    if not isinstance(document, dict) or not isinstance(document.get("patterns"), list):
        raise PatternFileError(path, 'expected an object with a "patterns" list')
    updated = _timestamp(document.get("last_updated"))
    items: list[MemoryItem] = []
    errors: list[PatternError] = []
    for index, raw in enumerate(document["patterns"]):
        pid = raw.get("pattern_id") if isinstance(raw, dict) and isinstance(raw.get("pattern_id"), str) else None
        try:
            items.append(pattern_item(raw, project=project, source=str(path), updated=updated))
        except ValidationError as exc:
            errors.append(PatternError(index, pid, _reason(exc)))
        except ValueError as exc:
            errors.append(PatternError(index, pid, str(exc)))
    return ParsedPatterns(items, errors)


def read_json(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise PatternFileError(path, f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PatternFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PatternFileError(path, f"not valid JSON: {exc}") from exc


def parse_pattern_file(path: Path, *, project: str) -> ParsedPatterns:
    return parse_patterns(read_json(path), path=path, project=project)


def merge_pattern_files(project_file: Path | None, home_file: Path | None, *, project: str) -> ParsedPatterns:
    """The project file merged over the home file: same pattern_id, the project's wins.

    A missing file contributes nothing; an unreadable one raises PatternFileError.
    """
    merged: dict[str, MemoryItem] = {}
    errors: list[PatternError] = []
    for path in (home_file, project_file):
        if path is None or not path.exists():
            continue
        parsed = parse_pattern_file(path, project=project)
        errors.extend(parsed.errors)
        for item in parsed.items:
            merged[item.id] = item
    return ParsedPatterns(list(merged.values()), errors)
