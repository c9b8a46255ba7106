"""Seed 002's SessionEnd update, opt-in (``CTXBUS_CAPTURE_WRITE_PATTERNS=1``): what a session taught, written back
to the project's learned-pattern file (``.claude/learned_patterns.json`` at the repository root).

The text edit is :mod:`ctxbus.memory.pattern_writeback`'s (the user's own patterns stay byte-identical); this module
reads the file, writes the result atomically (a temporary file in the same directory, flushed, then renamed over
the file, its permission bits kept), and never raises: a file ctxbus cannot read, or a directory it cannot write,
is logged and left as it was. Only lessons go back (learnings, principles, warnings): a session's episode is the
store's history, not a pattern to follow.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import structlog

from ctxbus.hooks.project import git_root
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.memory.pattern_writeback import WritebackError, pattern_of, updated_text

log = structlog.get_logger("ctxbus.gateway.patterns")

#: the kinds of captured items that go back to the pattern file
LESSON_KINDS = frozenset({MemoryKind.LEARNING, MemoryKind.PRINCIPLE, MemoryKind.WARNING})


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text`` in one rename (a reader sees the old file or the new, never half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_learned(cwd: str | None, patterns_file: str, items: Sequence[MemoryItem], now: datetime) -> int:
    """Write the session's lessons among ``items`` into the pattern file of the repository at ``cwd``; returns how
    many patterns the file gained or changed (0 when nothing changed, or on any failure, which is logged)."""
    lessons = [i for i in items if i.kind in LESSON_KINDS]
    if not lessons or not cwd:
        return 0
    path = Path(git_root(cwd) or cwd) / patterns_file
    try:
        before = path.read_text(encoding="utf-8") if path.exists() else None
        after = updated_text(before, [pattern_of(i) for i in lessons], now)
        if after == before:
            return 0
        write_atomically(path, after)
    except (WritebackError, OSError, UnicodeDecodeError) as exc:
        log.warning("pattern_writeback_failed", file=str(path), error=str(exc))
        return 0
    log.info("pattern_writeback", file=str(path), patterns=[f"{i.id}" for i in lessons])
    return len(lessons)
