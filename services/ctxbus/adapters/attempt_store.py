"""Attempt records kept on disk (SQLite under the data directory), so pre-context survives restarts.

Keyed by (project, task, attempt number): a redelivered or corrected attempt replaces the earlier row,
and one project never reads another's attempts. A task's outcome (``close_task``) ends it: its
attempts are kept, but only attempts recorded after the latest closing outcome count (a task id used
again starts afresh). Readable from other processes while the injector writes (WAL), e.g. by
``ctxbus precontext``.

Schema versions (``PRAGMA user_version``): 0 keyed attempts by task only; 1 adds the project and the
closures. Opening a version-0 file migrates it in one transaction: every row is kept, under the
project :data:`~ctxbus.core.precontext.DEFAULT_PROJECT` (version 0 never stored the project).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ctxbus.adapters.sqlite import open_wal, state_id
from ctxbus.contract.payloads import AttemptRecorded
from ctxbus.core.precontext import DEFAULT_PROJECT, AttemptRecord, task_end_state

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    project TEXT NOT NULL,
    task_id TEXT NOT NULL,
    attempt_number INTEGER NOT NULL,
    record TEXT NOT NULL,
    enable_pre_context INTEGER,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (project, task_id, attempt_number)
);
CREATE TABLE IF NOT EXISTS task_closures (
    project TEXT NOT NULL,
    task_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    closed_at TEXT NOT NULL,
    PRIMARY KEY (project, task_id)
);
"""

#: Version 0 -> 1: the same rows, under the default project (the old table is renamed, copied, dropped).
_MIGRATE_0_TO_1 = f"""
ALTER TABLE attempts RENAME TO attempts_v0;
{_SCHEMA}
INSERT INTO attempts (project, task_id, attempt_number, record, enable_pre_context, recorded_at)
    SELECT ?, task_id, attempt_number, record, enable_pre_context, recorded_at FROM attempts_v0;
DROP TABLE attempts_v0;
"""


@dataclass(frozen=True, slots=True)
class TaskClosure:
    """The outcome that ended a task: ``state`` is ``completed`` or ``abandoned``."""

    outcome: str
    state: str
    closed_at: str


@dataclass(frozen=True, slots=True)
class TaskAttempts:
    """A task's attempts since its latest closing outcome (raw: the builders drop what is corrupt),
    the task's own pre-context switch among them, and the closing outcome if nothing came after it."""

    attempts: list[dict[str, object]]
    override: bool | None
    closure: TaskClosure | None

    @property
    def closed(self) -> bool:
        return self.closure is not None


def _instant(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


class AttemptStore:
    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, "")
        try:
            self._migrate()
            #: names the consumer groups of the loops that fill this store (see ctxbus.adapters.sqlite.state_id)
            self.state_id = state_id(self._db)
        except BaseException:
            self._db.close()
            raise

    def _migrate(self) -> None:
        db = self._db
        if db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")  # one process migrates; the others then see version 1
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                if "attempts" in {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} and (
                    "project" not in _columns(db, "attempts")
                ):
                    for statement in _MIGRATE_0_TO_1.split(";"):
                        if statement.strip():
                            db.execute(statement, (DEFAULT_PROJECT,) if "?" in statement else ())
                else:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()

    def add(self, project: str, attempt: AttemptRecorded, recorded_at: str) -> None:
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
            "INSERT OR REPLACE INTO attempts "
            "(project, task_id, attempt_number, record, enable_pre_context, recorded_at) VALUES (?, ?, ?, ?, ?, ?)",
            (project, attempt.task_id, attempt.attempt_number, record.model_dump_json(), override, recorded_at),
        )

    def close_task(self, project: str, task_id: str, outcome: str, closed_at: str) -> None:
        """Record that ``outcome`` ended the task at ``closed_at``; the latest closing time wins
        (a redelivered or late older outcome changes nothing)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute(
                "SELECT closed_at FROM task_closures WHERE project = ? AND task_id = ?", (project, task_id)
            ).fetchone()
            known = _instant(row[0]) if row else None
            new = _instant(closed_at)
            if row is None or (new is not None and (known is None or new > known)):
                self._db.execute(
                    "INSERT OR REPLACE INTO task_closures (project, task_id, outcome, closed_at) VALUES (?, ?, ?, ?)",
                    (project, task_id, outcome, closed_at),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def task(self, project: str, task_id: str) -> TaskAttempts:
        """The task's attempts that still count (recorded after its latest closing outcome, if any)."""
        closure_row = self._db.execute(
            "SELECT outcome, closed_at FROM task_closures WHERE project = ? AND task_id = ?", (project, task_id)
        ).fetchone()
        rows = self._db.execute(
            "SELECT record, enable_pre_context, recorded_at FROM attempts "
            "WHERE project = ? AND task_id = ? ORDER BY attempt_number",
            (project, task_id),
        ).fetchall()
        closed_at = _instant(closure_row[1]) if closure_row else None
        if closure_row is not None:
            # after a closure only attempts recorded later count (an unreadable time counts as earlier)
            rows = [r for r in rows if closed_at is not None and (at := _instant(r[2])) is not None and at > closed_at]
        attempts: list[dict[str, object]] = []
        for text, _, _ in rows:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                attempts.append(value)
        override = next((bool(r[1]) for r in reversed(rows) if r[1] is not None), None)
        closure = None
        if closure_row is not None and not rows:
            outcome = str(closure_row[0])
            closure = TaskClosure(outcome, task_end_state(outcome), str(closure_row[1]))
        return TaskAttempts(attempts, override, closure)
