"""The queryable record of injections: one SQLite row per injected event (idempotent on event id)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxbus.adapters.sqlite import open_wal
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected

_SCHEMA = """
CREATE TABLE IF NOT EXISTS injections (
    event_id TEXT PRIMARY KEY,
    correlation_id TEXT NOT NULL,
    causation_id TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    project TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    agent_role TEXT NOT NULL,
    trigger TEXT NOT NULL,
    context_source TEXT NOT NULL,
    item_ids TEXT NOT NULL,
    item_count INTEGER NOT NULL,
    context_chars INTEGER NOT NULL,
    context_bytes INTEGER NOT NULL,
    token_estimate INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    empty_reason TEXT,
    retrieval_ms REAL NOT NULL,
    assembly_ms REAL NOT NULL,
    end_to_end_ms REAL,
    emitted_at TEXT NOT NULL,
    context TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS injections_project_time ON injections (project, emitted_at);
CREATE INDEX IF NOT EXISTS injections_correlation ON injections (correlation_id);
"""

_COLUMNS = (
    "event_id, correlation_id, causation_id, entity_id, session_id, project, agent_name, agent_role, trigger, "
    "context_source, item_ids, item_count, context_chars, context_bytes, token_estimate, truncated, empty_reason, "
    "retrieval_ms, assembly_ms, end_to_end_ms, emitted_at, context"
)


@dataclass(frozen=True, slots=True)
class InjectionRow:
    event_id: str
    correlation_id: str
    session_id: str
    project: str
    agent_name: str
    trigger: str
    item_ids: list[str]
    context_chars: int
    token_estimate: int
    empty_reason: str | None
    end_to_end_ms: float | None
    emitted_at: str

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def end_to_end_ms(event: Envelope[ContextInjected]) -> float | None:
    start: datetime | None = event.payload.request_emitted_at
    if start is None:
        return None
    return max(0.0, (event.emitted_at - start).total_seconds() * 1000.0)


class InjectionRecord:
    """SQLite file under the data directory; safe to read from other processes while written."""

    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, _SCHEMA, synchronous="NORMAL")

    def close(self) -> None:
        self._db.close()

    def add(self, event: Envelope[ContextInjected]) -> bool:
        """Record one injection; False when this event id was already recorded (a redelivery)."""
        p = event.payload
        row = (
            str(event.event_id),
            str(event.correlation_id),
            str(event.causation_id),
            str(event.entity_id),
            event.session_id,
            event.project,
            p.agent_name,
            p.agent_role,
            p.trigger.value,
            p.context_source.value,
            json.dumps(list(p.item_ids)),
            len(p.item_ids),
            p.context_chars,
            p.context_size_bytes,
            p.token_estimate,
            int(p.truncated),
            p.empty_reason,
            float(p.retrieval_duration_ms),
            p.assembly_duration_ms,
            end_to_end_ms(event),
            event.emitted_at.isoformat(),
            p.context,
        )
        placeholders = ", ".join("?" * len(row))
        cur = self._db.execute(f"INSERT OR IGNORE INTO injections ({_COLUMNS}) VALUES ({placeholders})", row)
        return cur.rowcount == 1

    def recent(
        self, *, project: str | None = None, correlation_id: str | None = None, limit: int = 20
    ) -> list[InjectionRow]:
        clauses, args = [], []
        if project is not None:
            clauses.append("project = ?")
            args.append(project)
        if correlation_id is not None:
            clauses.append("correlation_id = ?")
            args.append(correlation_id)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = (
            "SELECT event_id, correlation_id, session_id, project, agent_name, trigger, item_ids, context_chars, "
            f"token_estimate, empty_reason, end_to_end_ms, emitted_at FROM injections {where} "
            "ORDER BY emitted_at DESC LIMIT ?"
        )
        with self._cursor(sql, [*args, limit]) as rows:
            return [
                InjectionRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], r[10], r[11])
                for r in rows
            ]

    def count(self, project: str | None = None) -> int:
        sql = "SELECT COUNT(*) FROM injections" + (" WHERE project = ?" if project else "")
        with self._cursor(sql, [project] if project else []) as rows:
            return int(next(iter(rows))[0])

    @contextmanager
    def _cursor(self, sql: str, args: list[Any]) -> Iterator[sqlite3.Cursor]:
        cur = self._db.execute(sql, args)
        try:
            yield cur
        finally:
            cur.close()
