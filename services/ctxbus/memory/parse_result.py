"""What the memory-file parsers return, and the helpers they share.

A parser reads one file and returns :class:`ParsedMemories`: the items it could
build (in file order) and one :class:`LineError` per entry it skipped. A file
that cannot be read at all (missing, unreadable, too big, not UTF-8) is a
:class:`MemoryFileError` naming the file.

The only I/O is reading the file named by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ctxbus.memory.model import MemoryItem

#: Largest memory file read, in bytes.
MAX_FILE_BYTES = 20_000_000
#: Validation messages quoted per bad entry.
MAX_REASONS = 3


class MemoryFileError(ValueError):
    """The file as a whole cannot be read as a memory file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LineError:
    """One entry that was skipped: its 1-based line, its id when it has one, why, and in which file."""

    line: int
    item_id: str | None
    reason: str
    path: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:" if self.path else "line "
        who = f" ({self.item_id})" if self.item_id else ""
        return f"{where}{self.line}{who}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ParsedMemories:
    """The items read (in file order) and the entries skipped."""

    items: list[MemoryItem]
    errors: list[LineError]


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark is dropped); MemoryFileError when it cannot be had."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise MemoryFileError(path, f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit")
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise MemoryFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise MemoryFileError(path, f"not UTF-8 text: byte {exc.start} cannot be decoded") from exc


def validation_reason(exc: ValidationError) -> str:
    """A short reason naming the fields pydantic refused: ``"title: String should have ..."``."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'item'}: {e['msg']}" for e in exc.errors()[:MAX_REASONS])
