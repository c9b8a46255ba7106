"""The curation ledger: which items were forgotten (and explicitly re-added) and which are pinned, on disk (SQLite).

Kept by the store's owner. A forgotten item is remembered here after the store deleted it, so an upsert of it
(a re-import, a replay, a pattern sync) is refused by the rule of :mod:`ctxbus.core.curation`. Times are the
events' own (``emitted_at``), so applying the curation topic again in any order gives the same ledger.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from ctxbus.adapters.sqlite import open_wal, state_id
from ctxbus.core.curation import ForgetMark, PinMark

_SCHEMA = """
CREATE TABLE IF NOT EXISTS forgotten (
    project TEXT NOT NULL,
    item_id TEXT NOT NULL,
    forgotten_at REAL,
    restored_at REAL,
    PRIMARY KEY (project, item_id)
);
CREATE TABLE IF NOT EXISTS pins (
    project TEXT NOT NULL,
    item_id TEXT NOT NULL,
    pinned INTEGER NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (project, item_id)
);
"""

Key = tuple[str, str]


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _seconds(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


class CurationLedger:
    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, _SCHEMA)
        #: names the consumer groups of the loops that fill this ledger and the store beside it
        #: (see ctxbus.adapters.sqlite.state_id)
        self.state_id = state_id(self._db)
        #: held by whoever reads a mark and writes by it (curation, and upserts checked against it)
        self.lock = threading.RLock()

    def close(self) -> None:
        self._db.close()

    def forget_marks(self, keys: Iterable[Key]) -> dict[Key, ForgetMark]:
        """The marks of those ``keys`` that have one."""
        found: dict[Key, ForgetMark] = {}
        for project, item_id in dict.fromkeys(keys):
            row = self._db.execute(
                "SELECT forgotten_at, restored_at FROM forgotten WHERE project = ? AND item_id = ?", (project, item_id)
            ).fetchone()
            if row is not None:
                found[(project, item_id)] = ForgetMark(_time(row[0]), _time(row[1]))
        return found

    def set_forget_marks(self, marks: dict[Key, ForgetMark]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO forgotten VALUES (?, ?, ?, ?)",
                [(p, i, _seconds(m.forgotten_at), _seconds(m.restored_at)) for (p, i), m in marks.items()],
            )

    def forgotten(self, project: str | None = None) -> dict[Key, datetime]:
        """The items that are forgotten now (of ``project``, or of all), with the time of their latest forget."""
        rows = self._db.execute(
            "SELECT project, item_id, forgotten_at, restored_at FROM forgotten WHERE forgotten_at IS NOT NULL"
            + (" AND project = ?" if project is not None else ""),
            (project,) if project is not None else (),
        ).fetchall()
        marks = {(str(p), str(i)): ForgetMark(_time(f), _time(r)) for p, i, f, r in rows}
        return {k: m.forgotten_at for k, m in marks.items() if m.forgotten and m.forgotten_at is not None}

    def pin_marks(self, keys: Iterable[Key]) -> dict[Key, PinMark]:
        found: dict[Key, PinMark] = {}
        for project, item_id in dict.fromkeys(keys):
            row = self._db.execute(
                "SELECT pinned, at FROM pins WHERE project = ? AND item_id = ?", (project, item_id)
            ).fetchone()
            if row is not None:
                at = _time(row[1])
                assert at is not None
                found[(project, item_id)] = PinMark(bool(row[0]), at)
        return found

    def set_pin_marks(self, marks: dict[Key, PinMark]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO pins VALUES (?, ?, ?, ?)",
                [(p, i, int(m.pinned), m.at.timestamp()) for (p, i), m in marks.items()],
            )
