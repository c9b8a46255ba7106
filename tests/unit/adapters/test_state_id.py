"""A state file's id names the consumer groups that fill it: the same file keeps its id, a new file gets another."""

from __future__ import annotations

from pathlib import Path

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.adapters.sqlite import open_wal, state_id


def test_a_file_keeps_its_id_and_a_new_file_gets_another(tmp_path: Path) -> None:
    first = open_wal(tmp_path / "a.sqlite3", "")
    second = open_wal(tmp_path / "a.sqlite3", "")  # another connection (another process) to the same file
    try:
        made = state_id(first)
        assert state_id(second) == made == state_id(first)
        other = open_wal(tmp_path / "b.sqlite3", "")
        assert state_id(other) != made
        other.close()
    finally:
        first.close()
        second.close()
    (tmp_path / "a.sqlite3").unlink()
    (tmp_path / "a.sqlite3-wal").unlink(missing_ok=True)
    again = open_wal(tmp_path / "a.sqlite3", "")
    assert state_id(again) != made  # the state is gone: so is its id (its group reads from the start)
    again.close()


def test_a_copied_file_is_a_new_state(tmp_path: Path) -> None:
    original = open_wal(tmp_path / "a" / "l.sqlite3", "")
    made = state_id(original)
    original.close()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "l.sqlite3").write_bytes((tmp_path / "a" / "l.sqlite3").read_bytes())
    copy = open_wal(tmp_path / "b" / "l.sqlite3", "")
    assert state_id(copy) != made and state_id(copy) == state_id(copy)
    copy.close()
    again = open_wal(tmp_path / "a" / "l.sqlite3", "")
    assert state_id(again) == made
    again.close()


def test_every_state_file_has_its_own_id_across_reopens(tmp_path: Path) -> None:
    ids = []
    for _ in range(2):
        ledger, curation, attempts = (
            LearningLedger(tmp_path / "l.sqlite3"),
            CurationLedger(tmp_path / "c.sqlite3"),
            AttemptStore(tmp_path / "a.sqlite3"),
        )
        ids.append((ledger.state_id, curation.state_id, attempts.state_id))
        ledger.close()
        curation.close()
        attempts.close()
    assert ids[0] == ids[1] and len(set(ids[0])) == 3
