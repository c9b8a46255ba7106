"""A lesson captured again strengthens the item it repeats; the same session captured twice counts once."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxbus.memory.consolidate import CAPTURED_CONFIDENCE, REPEAT_CAP, consolidated, is_repeat
from ctxbus.memory.model import CAPTURED_SOURCE, FileRef, MemoryItem, Provenance

T0 = datetime(2026, 11, 1, tzinfo=UTC)
T1 = datetime(2026, 11, 20, tzinfo=UTC)


def cap(session: str, *, at: datetime = T0, files: tuple[str, ...] = ("a.py",), **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {
            "id": "lesson",
            "project": "p",
            "kind": "learning",
            "content": "TypeError in a.py fixed",
            "source": CAPTURED_SOURCE,
            "confidence": CAPTURED_CONFIDENCE,
            "provenance": Provenance(session_id=session, rule="failure_fix"),
            "files": tuple(FileRef(path=f) for f in files),
            "created_at": at,
            "updated_at": at,
            **fields,
        }
    )


def test_a_capture_in_another_session_counts_one_more_and_gains_conviction() -> None:
    first, again = cap("s1"), cap("s2", at=T1, files=("b.py",))
    assert is_repeat(first, again)
    kept = consolidated(first, again)
    assert kept.occurrences == 2 and kept.confidence > first.confidence
    assert kept.provenance is not None and kept.provenance.session_id == "s1"  # the first capture's origin
    assert [f.path for f in kept.files] == ["a.py", "b.py"] and kept.created_at == T0


def test_the_same_session_captured_again_counts_once() -> None:
    first = cap("s1", occurrences=2, confidence=0.45)
    again = cap("s1", at=T1)
    kept = consolidated(first, again)
    assert not is_repeat(first, again)
    assert kept.occurrences == 2 and kept.confidence == 0.45


def test_repeats_alone_stop_at_the_cap() -> None:
    item = cap("s0")
    for n in range(1, 20):
        item = consolidated(item, cap(f"s{n}"))
    assert item.occurrences == 20 and item.confidence == REPEAT_CAP


def test_imported_items_are_replaced_as_before() -> None:
    imported = MemoryItem(id="lesson", project="p", kind="learning", content="x", confidence=0.9)
    incoming = MemoryItem(id="lesson", project="p", kind="learning", content="y", confidence=0.5)
    assert consolidated(imported, incoming) == incoming


def test_a_captured_item_starts_below_an_import_yet_above_the_hooks_floor() -> None:
    from ctxbus.capture.items import CORRECTION_CONFIDENCE, REMEMBER_CONFIDENCE
    from ctxbus.settings import HookSettings

    floor = HookSettings().min_confidence
    imported = MemoryItem(id="i", project="p", kind="principle", content="x").confidence
    assert floor <= CAPTURED_CONFIDENCE < imported
    assert floor <= CORRECTION_CONFIDENCE < imported and imported >= REMEMBER_CONFIDENCE
