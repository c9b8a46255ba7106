"""Opening the project's small SQLite files the one way they are all opened."""

from __future__ import annotations

import sqlite3
import uuid
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


_STATE_ID = """
CREATE TABLE IF NOT EXISTS ctxbus_state_id (one INTEGER PRIMARY KEY CHECK (one = 1), id TEXT NOT NULL, path TEXT);
"""


def state_id(db: sqlite3.Connection) -> str:
    """The file's own id, made the first time it is asked for (by whichever process asks first).

    A consumer loop that builds this file's state from a topic names its consumer group after it
    (``ctxbus.state_groups.state_group``): the group's committed offsets then live exactly as long as the state
    they describe. A new or deleted file is a new id, so a new group, which reads its topic from the start; so is
    a file copied or moved to another path (a copied data directory must not share its copy's group, which would
    split the topic between them). Reading a topic again is harmless: every state is idempotent by event."""
    db.executescript(_STATE_ID)
    path = next((str(row[2]) for row in db.execute("PRAGMA database_list") if row[1] == "main"), "")
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT id, path FROM ctxbus_state_id").fetchone()
        if row is None or row[1] != path:
            made = uuid.uuid4().hex[:12]
            db.execute("INSERT OR REPLACE INTO ctxbus_state_id (one, id, path) VALUES (1, ?, ?)", (made, path))
            row = (made, path)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return str(row[0])
