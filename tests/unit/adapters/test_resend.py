"""The keeper of what a publisher sent to ``up``'s embedded broker until the archive holds it
(adapters/kafka/resend.py), over the archive's progress file (adapters/kafka/archive_progress.py)."""

from __future__ import annotations

from pathlib import Path

from ctxbus.adapters.kafka.archive_progress import (
    LIVES_KEPT,
    Progress,
    progress_path,
    read_progress,
    start_life,
    write_progress,
)
from ctxbus.adapters.kafka.resend import Keeper, Kept

T = "ctxbus.context.retrieval.requested.v1"


def kept(life: str, partition: int, offset: int) -> Kept:
    return Kept(life, T, partition, offset, b"k", f"{life}-{partition}-{offset}".encode(), (("h", b"v"),), 1)


def test_records_the_archive_holds_are_forgotten_and_nothing_is_due_while_the_broker_lives(tmp_path: Path) -> None:
    start_life(tmp_path, "a")
    keeper = Keeper(progress_path(tmp_path))
    assert keeper.life == "a"
    for offset in range(3):
        keeper.keep(kept("a", 0, offset))
    write_progress(tmp_path, Progress("a", {f"{T}:0": 2}))
    assert keeper.due() == []
    assert len(keeper) == 1  # offset 2 is not archived yet: still kept


def test_after_a_broker_death_what_the_archive_lacked_is_due_once_and_the_rest_dropped(tmp_path: Path) -> None:
    start_life(tmp_path, "a")
    keeper = Keeper(progress_path(tmp_path))
    for partition, offset in [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1)]:
        keeper.keep(kept("a", partition, offset))
    write_progress(tmp_path, Progress("a", {f"{T}:0": 1, f"{T}:1": 1}))  # the broker dies after this flush
    start_life(tmp_path, "b")  # the next round's archiver, after the refill
    due = keeper.due()
    assert [(k.partition, k.offset) for k in due] == [(0, 1), (0, 2), (1, 1)]  # in the order they were sent
    assert keeper.due() == [] and len(keeper) == 0


def test_a_life_the_file_no_longer_knows_sends_all_its_records_again(tmp_path: Path) -> None:
    keeper = Keeper(progress_path(tmp_path))
    start_life(tmp_path, "a")
    keeper.keep(kept("a", 0, 0))
    for n in range(LIVES_KEPT + 1):
        start_life(tmp_path, f"later-{n}")
    assert "a" not in (read_progress(progress_path(tmp_path)) or Progress("")).lives
    assert [k.offset for k in keeper.due()] == [0]


def test_nothing_is_kept_without_a_progress_file_and_the_buffer_is_bounded(tmp_path: Path) -> None:
    keeper = Keeper(progress_path(tmp_path), limit=2)
    assert keeper.life is None
    start_life(tmp_path, "a")
    for offset in range(3):
        keeper.keep(kept("a", 0, offset))
    assert len(keeper) == 2 and keeper.dropped == 1


def test_a_new_life_keeps_the_last_lives_with_their_final_ends(tmp_path: Path) -> None:
    start_life(tmp_path, "a")
    write_progress(tmp_path, Progress("a", {f"{T}:0": 7}))
    progress = start_life(tmp_path, "b")
    assert progress == Progress("b", {}, {"a": {f"{T}:0": 7}})
    assert read_progress(progress_path(tmp_path)) == progress
    (tmp_path / "progress.json").write_text("{not json")
    assert read_progress(progress_path(tmp_path)) is None
