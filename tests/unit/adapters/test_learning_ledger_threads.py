"""The learning ledger is shared by the store owner's two learning loops (injections, outcomes) and the
gateway's memory routes, each calling it from worker threads: concurrent writes and reads on its one SQLite
connection must neither fail ("cannot start a transaction within a transaction", seen in CI) nor lose a fact."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.core.learning import InjectionFact, OutcomeFact

N = 300


def test_concurrent_writers_and_readers_share_the_ledger(tmp_path: Path) -> None:
    ledger = LearningLedger(tmp_path / "learning.sqlite3")
    t0 = datetime(2026, 11, 27, tzinfo=UTC)
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def guarded(work: object) -> threading.Thread:
        def run() -> None:
            start.wait()
            try:
                work()  # type: ignore[operator]
            except BaseException as exc:
                errors.append(exc)

        return threading.Thread(target=run)

    def injections() -> None:
        for n in range(N):
            ledger.add_injection(
                InjectionFact(f"i{n}", "p", f"s{n % 7}", None, t0 + timedelta(seconds=n), (("p", "a"),))
            )

    def outcomes() -> None:
        for n in range(N):
            ledger.add_outcome(
                OutcomeFact(f"o{n}", "p", f"s{n % 7}", None, "session", "failed", t0 + timedelta(seconds=n))
            )

    def reads() -> None:
        for _ in range(N):
            ledger.injection_summary("p")
            ledger.recent_outcomes("p", limit=5)

    threads = [guarded(injections), guarded(outcomes), guarded(reads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ledger.injections_of(("p", "a"))[0] == N
    assert len(ledger.recent_outcomes("p", limit=N + 1)) == N
    ledger.close()
