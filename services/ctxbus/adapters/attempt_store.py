"""Attempt records kept on disk (SQLite under the data directory), so pre-context survives restarts.

One row per (task, attempt number): a redelivered or corrected attempt replaces the earlier row.
Readable from other processes while the injector writes (WAL), e.g. by ``ctxbus precontext``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxbus.adapters.sqlite import open_wal
from ctxbus.contract.payloads import AttemptRecorded
from ctxbus.core.precontext import AttemptRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    task_id TEXT NOT NULL,
    attempt_number INTEGER NOT NULL,
    record TEXT NOT NULL,
    enable_pre_context INTEGER,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (task_id, attempt_number)
);
"""


class AttemptStore:
    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def add(self, attempt: AttemptRecorded, recorded_at: str) -> None:
        record = AttemptRecord(
            task_id=attempt.task_id,
            attempt_number=attempt.attempt_number,
            provider=attempt.provider,
            timestamp=recorded_at,
            files_created=attempt.files_created,
            files_updated=attempt.files_updated,
            status=attempt.status.value,
            validation_errors=attempt.validation_errors,
            exit_reason=attempt.exit_reason,
        )
        override = None if attempt.enable_pre_context is None else int(attempt.enable_pre_context)
        self._db.execute(
            "INSERT OR REPLACE INTO attempts (task_id, attempt_number, record, enable_pre_context, recorded_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (attempt.task_id, attempt.attempt_number, record.model_dump_json(), override, recorded_at),
        )

    def attempts(self, task_id: str) -> list[dict[str, object]]:
        """The task's attempt records as stored (raw: the builders drop whatever is corrupt)."""
        rows = self._db.execute(
            "SELECT record FROM attempts WHERE task_id = ? ORDER BY attempt_number", (task_id,)
        ).fetchall()
        out: list[dict[str, object]] = []
        for (text,) in rows:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def override(self, task_id: str) -> bool | None:
        """The task's own pre-context switch: the latest attempt that set one."""
        row = self._db.execute(
            "SELECT enable_pre_context FROM attempts WHERE task_id = ? AND enable_pre_context IS NOT NULL "
            "ORDER BY attempt_number DESC LIMIT 1",
            (task_id,),
        ).fetchone()
        return None if row is None else bool(row[0])
