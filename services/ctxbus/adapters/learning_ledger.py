"""The facts learning is computed from: injections and outcomes, on disk (SQLite), idempotent by event id.

Counts are computed in SQL with exactly the rule of :func:`ctxbus.core.learning.feedback_counts`
(an outcome counts once for every item injected into its session, or its task, at or before the
outcome's time), so they depend on the set of facts, never on the order they arrived in.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ctxbus.adapters.sqlite import open_wal, state_id
from ctxbus.core.learning import TASK, InjectionFact, OutcomeFact
from ctxbus.memory.model import Feedback

_SCHEMA = """
CREATE TABLE IF NOT EXISTS injections (
    event_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    session_id TEXT NOT NULL,
    task_id TEXT,
    emitted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS injection_items (
    event_id TEXT NOT NULL,
    project TEXT NOT NULL,
    item_id TEXT NOT NULL,
    PRIMARY KEY (event_id, project, item_id)
);
CREATE INDEX IF NOT EXISTS injection_items_item ON injection_items (project, item_id);
CREATE INDEX IF NOT EXISTS injections_session ON injections (project, session_id);
CREATE INDEX IF NOT EXISTS injections_task ON injections (project, task_id);
CREATE TABLE IF NOT EXISTS outcomes (
    event_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    session_id TEXT NOT NULL,
    task_id TEXT,
    by_task INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    emitted_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outcomes_session ON outcomes (project, session_id);
CREATE INDEX IF NOT EXISTS outcomes_task ON outcomes (project, task_id);
"""

#: an outcome applies to an injection (the join of both tables, aliases o and i): by session or by task. A query
#: joins on each in turn (``_either``), so each join uses its index (a join on the OR of both used neither)
_BY_SESSION = "i.project = o.project AND i.session_id = o.session_id AND o.by_task = 0 AND i.emitted_at <= o.emitted_at"
_BY_TASK = "i.project = o.project AND i.task_id = o.task_id AND o.by_task = 1 AND i.emitted_at <= o.emitted_at"


def _either(query: str) -> str:
    """``query`` (with ``{applies}`` where the join's condition goes) once by session UNION once by task: its
    parameters are given twice."""
    return f"{query.format(applies=_BY_SESSION)} UNION {query.format(applies=_BY_TASK)}"


_ITEMS_OF_OUTCOME = _either(
    "SELECT ii.project, ii.item_id FROM outcomes o JOIN injections i ON {applies} "
    "JOIN injection_items ii ON ii.event_id = i.event_id WHERE o.event_id = ?"
)
_COUNTED = _either("SELECT 1 FROM injections i JOIN outcomes o ON {applies} WHERE i.event_id = ?")

#: the outcomes counting for one item (project, item id twice), each once (UNION): one join on the OR of session and
#: task scanned every outcome of the project for every injection of the item (13-17 ms an item at 2,000 injections
#: and 500 outcomes, against 1-4 ms)
_COUNTS = "SELECT outcome, COUNT(*) FROM ({}) GROUP BY outcome".format(
    _either(
        "SELECT o.event_id, o.outcome FROM injection_items ii JOIN injections i ON i.event_id = ii.event_id "
        "JOIN outcomes o ON {applies} WHERE ii.project = ? AND ii.item_id = ?"
    )
)

Key = tuple[str, str]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _serialised(method: Callable[Concatenate[LearningLedger, _P], _R]) -> Callable[Concatenate[LearningLedger, _P], _R]:
    """One call at a time on the ledger's connection: the learning loops (injections, outcomes) and the gateway's
    memory routes call it from worker threads, and two threads in one SQLite connection's transaction fail
    ("cannot start a transaction within a transaction")."""

    @functools.wraps(method)
    def run(self: LearningLedger, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class LearningLedger:
    def __init__(self, path: Path) -> None:
        self._db = open_wal(path, _SCHEMA)
        self._lock = threading.Lock()
        #: held by whoever reads counts and writes them elsewhere (the store), so a write of older counts never
        #: lands after one of newer counts (the learning loops and the memory loop write from worker threads)
        self.publishing = threading.Lock()
        #: names the consumer groups of the loops that fill this ledger (see ctxbus.adapters.sqlite.state_id)
        self.state_id = state_id(self._db)

    @_serialised
    def close(self) -> None:
        self._db.close()

    @_serialised
    def add_injection(self, fact: InjectionFact) -> set[Key]:
        """Record an injection; returns the items whose counts may have changed: none for a repeat, and none while
        no recorded outcome counts this injection (an injection adds to counts only through outcomes, so the
        usual injection, made before its outcome is known, costs no recount and no store write)."""
        with self._db:
            self._db.execute("BEGIN")
            cur = self._db.execute(
                "INSERT OR IGNORE INTO injections VALUES (?, ?, ?, ?, ?)",
                (fact.event_id, fact.project, fact.session_id, fact.task_id, fact.emitted_at.timestamp()),
            )
            if cur.rowcount == 0:
                return set()
            self._db.executemany(
                "INSERT OR IGNORE INTO injection_items VALUES (?, ?, ?)",
                [(fact.event_id, project, item_id) for project, item_id in fact.items],
            )
        counted = self._db.execute(_COUNTED, (fact.event_id, fact.event_id)).fetchone()
        return set(fact.items) if counted else set()

    @_serialised
    def add_outcome(self, fact: OutcomeFact) -> set[Key]:
        """Record an outcome; returns the items it counts for (empty for a repeat)."""
        by_task = int(fact.scope == TASK and bool(fact.task_id))
        with self._db:
            self._db.execute("BEGIN")
            cur = self._db.execute(
                "INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    fact.event_id,
                    fact.project,
                    fact.session_id,
                    fact.task_id,
                    by_task,
                    fact.outcome,
                    fact.emitted_at.timestamp(),
                ),
            )
            if cur.rowcount == 0:
                return set()
        rows = self._db.execute(_ITEMS_OF_OUTCOME, (fact.event_id, fact.event_id)).fetchall()
        return {(str(p), str(i)) for p, i in rows}

    @_serialised
    def counts(self, keys: Iterable[Key]) -> dict[Key, Feedback]:
        """The feedback of each item (zero counts for an item no outcome counts for)."""
        result: dict[Key, Feedback] = {}
        for project, item_id in sorted(set(keys)):
            rows = self._db.execute(_COUNTS, (project, item_id, project, item_id)).fetchall()
            by = {str(o): int(n) for o, n in rows}
            result[(project, item_id)] = Feedback(
                uses=sum(by.values()),
                successes=by.get("successful", 0),
                partials=by.get("partial", 0),
                failures=by.get("failed", 0),
            )
        return result

    @_serialised
    def injections_of(self, key: Key) -> tuple[int, datetime | None]:
        """How often an item was injected (injections this ledger knows), and when last."""
        count, last = self._db.execute(
            "SELECT COUNT(*), MAX(i.emitted_at) FROM injection_items ii JOIN injections i ON i.event_id = ii.event_id "
            "WHERE ii.project = ? AND ii.item_id = ?",
            key,
        ).fetchone()
        return int(count), None if last is None else datetime.fromtimestamp(float(last), UTC)

    @_serialised
    def injection_summary(self, project: str | None = None) -> dict[Key, tuple[int, datetime]]:
        """Every injected item (of ``project``, or all) with its injection count and the last one's time."""
        rows = self._db.execute(
            "SELECT ii.project, ii.item_id, COUNT(*), MAX(i.emitted_at) FROM injection_items ii "
            "JOIN injections i ON i.event_id = ii.event_id"
            + (" WHERE ii.project = ?" if project is not None else "")
            + " GROUP BY ii.project, ii.item_id",
            (project,) if project is not None else (),
        ).fetchall()
        return {(str(p), str(i)): (int(n), datetime.fromtimestamp(float(t), UTC)) for p, i, n, t in rows}

    @_serialised
    def recent_outcomes(self, project: str | None = None, limit: int = 20) -> list[tuple[OutcomeFact, set[Key]]]:
        """The latest outcomes (newest first, of ``project`` or all) and the items each counts for."""
        rows = self._db.execute(
            "SELECT event_id, project, session_id, task_id, by_task, outcome, emitted_at FROM outcomes"
            + (" WHERE project = ?" if project is not None else "")
            + " ORDER BY emitted_at DESC, event_id LIMIT ?",
            (*((project,) if project is not None else ()), limit),
        ).fetchall()
        found: list[tuple[OutcomeFact, set[Key]]] = []
        for event_id, proj, session, task, by_task, outcome, at in rows:
            fact = OutcomeFact(
                str(event_id),
                str(proj),
                str(session),
                task,
                TASK if by_task else "session",
                str(outcome),
                datetime.fromtimestamp(float(at), UTC),
            )
            items = self._db.execute(_ITEMS_OF_OUTCOME, (event_id, event_id)).fetchall()
            found.append((fact, {(str(p), str(i)) for p, i in items}))
        return found

    @_serialised
    def all_items(self) -> set[Key]:
        return {(str(p), str(i)) for p, i in self._db.execute("SELECT DISTINCT project, item_id FROM injection_items")}
