"""Opening the project's small SQLite files the one way they are all opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxbus.private_dir import make_private_dirs


def open_wal(path: Path, schema: str, *, synchronous: str = "FULL") -> sqlite3.Connection:
    """A connection in autocommit mode with WAL (readers in other processes never block the writer),
    usable from worker threads, with ``schema`` applied (``CREATE ... IF NOT EXISTS`` statements)."""
    make_private_dirs(path.parent)
    db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.executescript(schema)
    return db
