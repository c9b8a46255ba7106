"""Curation applied by the store's owner: the ledger (real SQLite) remembers forgets and pins; the store is a fake
that records what it was told."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.contract.payloads import CurationAction
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import VectorStore
from ctxbus.retriever.memory_curation import admit_items, apply_curation

T0 = datetime(2026, 11, 27, 10, tzinfo=UTC)


def item(item_id: str) -> MemoryItem:
    return MemoryItem(id=item_id, project="acme", kind="pattern", content=f"content of {item_id}")


class FakeStore:
    def __init__(self, *ids: str) -> None:
        self.held = {i: item(i) for i in ids}

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        return [self.held[i] for i in item_ids if project == "acme" and i in self.held]

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        return sum(1 for i in item_ids if self.held.pop(i, None) is not None)

    def set_pinned(self, project: str, item_ids: Sequence[str], pinned: bool) -> int:
        for i in item_ids:
            if i in self.held:
                self.held[i] = self.held[i].model_copy(update={"pinned": pinned})
        return len([i for i in item_ids if i in self.held])


def test_forget_deletes_and_is_remembered_across_reopening_the_ledger(tmp_path: Path) -> None:
    fake = FakeStore("a", "b")
    store = cast(VectorStore, fake)
    ledger = CurationLedger(tmp_path / "curation.sqlite3")
    done = apply_curation(store, ledger, "acme", CurationAction.FORGET, ["a", "ghost"], T0)
    assert done.changed == ("a",) and done.missing == ("ghost",) and set(fake.held) == {"b"}
    ledger.close()
    ledger = CurationLedger(tmp_path / "curation.sqlite3")  # a restart
    assert set(ledger.forgotten("acme")) == {("acme", "a"), ("acme", "ghost")}
    admitted, refused = admit_items(
        ledger, [item("a"), item("b"), item("ghost")], T0 + timedelta(1), allow_forgotten=False
    )
    assert [i.id for i in admitted] == ["b"] and [i.id for i, _ in refused] == ["a", "ghost"]
    older, _ = admit_items(ledger, [item("a")], T0 - timedelta(1), allow_forgotten=True)
    assert older == []  # an explicit re-add made before the forget does not undo it
    newer, _ = admit_items(ledger, [item("a")], T0 + timedelta(1), allow_forgotten=True)
    assert [i.id for i in newer] == ["a"] and ("acme", "a") not in ledger.forgotten("acme")
    again, _ = admit_items(ledger, [item("a")], T0 + timedelta(2), allow_forgotten=False)
    assert [i.id for i in again] == ["a"]  # re-added: plain upserts write it again
    ledger.close()


def test_the_latest_pin_wins_and_a_forget_drops_the_pin(tmp_path: Path) -> None:
    fake = FakeStore("a")
    store = cast(VectorStore, fake)
    ledger = CurationLedger(tmp_path / "curation.sqlite3")
    apply_curation(store, ledger, "acme", CurationAction.PIN, ["a"], T0)
    assert fake.held["a"].pinned
    stale = apply_curation(store, ledger, "acme", CurationAction.UNPIN, ["a"], T0 - timedelta(1))
    assert stale.changed == () and fake.held["a"].pinned  # an older unpin (replayed late) changes nothing
    apply_curation(store, ledger, "acme", CurationAction.UNPIN, ["a"], T0 + timedelta(1))
    assert not fake.held["a"].pinned
    apply_curation(store, ledger, "acme", CurationAction.PIN, ["a"], T0 + timedelta(2))
    apply_curation(store, ledger, "acme", CurationAction.FORGET, ["a"], T0 + timedelta(3))
    assert not ledger.pin_marks([("acme", "a")])[("acme", "a")].pinned
    ledger.close()
