"""The store owner's answer to an upsert: one result per item, in order; foreign items rejected with the reason."""

from __future__ import annotations

from ctxbus.contract.payloads import MemoryAction
from ctxbus.memory.ingest import Action, IngestReport, ItemResult
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.retriever.memory_upserts import accepted, stored_answer


def item(item_id: str, project: str = "acme", **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {"id": item_id, "project": project, "kind": "pattern", "content": item_id, **fields}
    )


def test_every_item_is_answered_in_order_and_only_the_foreign_one_is_rejected() -> None:
    items = [
        item("a"),
        item("x", "other"),
        item("b", supersedes=("ghost", "old")),
        item("c"),
        item("g", GLOBAL_PROJECT),
    ]
    report = IngestReport(  # what ingest said about the accepted items (a, b, c, g), in their order
        results=(
            ItemResult("a", "acme", Action.ADDED, "a"),
            ItemResult("b", "acme", Action.REPLACED, "a", near="a", similarity=0.8),
            ItemResult("c", "acme", Action.MERGED, "a", into="a"),
            ItemResult("g", GLOBAL_PROJECT, Action.ADDED, "g"),
        ),
        projects=("acme", GLOBAL_PROJECT),
        superseded=(("acme", "old"),),
        supersede_missing=(("acme", "ghost"),),
    )
    answer = stored_answer(items, "acme", report, global_allowed=True)
    assert [(r.id, r.action, r.into, r.cluster_id) for r in answer.results] == [
        ("a", MemoryAction.ADDED, None, "a"),
        ("x", MemoryAction.REJECTED, None, None),
        ("b", MemoryAction.REPLACED, None, "a"),
        ("c", MemoryAction.MERGED, "a", "a"),
        ("g", MemoryAction.ADDED, None, "g"),
    ]
    reasons = [r.reason for r in answer.results]
    assert "may write only that project" in (reasons[1] or "")
    assert reasons[2] == "supersedes 'ghost': no such item"
    assert "exact duplicate of 'a'" in (reasons[3] or "")
    assert reasons[0] is None and reasons[4] is None
    assert answer.superseded == ("old",)


def test_a_global_item_without_the_producers_marker_is_rejected_with_the_reason() -> None:
    items = [item("a"), item("g", GLOBAL_PROJECT), item("x", "other")]
    assert [i.id for i in accepted(items, "acme", global_allowed=False)] == ["a"]
    assert [i.id for i in accepted(items, "acme", global_allowed=True)] == ["a", "g"]
    report = IngestReport(results=(ItemResult("a", "acme", Action.ADDED, "a"),), projects=("acme",))
    answer = stored_answer(items, "acme", report, global_allowed=False)
    assert [(r.id, r.action) for r in answer.results] == [
        ("a", MemoryAction.ADDED),
        ("g", MemoryAction.REJECTED),
        ("x", MemoryAction.REJECTED),
    ]
    reason = answer.results[1].reason or ""
    assert "'__global__'" in reason and "ctxbus-global-write" in reason and "--global" in reason


def test_a_forgotten_item_is_answered_rejected_with_curations_reason_and_the_others_in_order() -> None:
    items = [item("a"), item("f"), item("b")]
    report = IngestReport(
        results=(ItemResult("a", "acme", Action.ADDED, "a"), ItemResult("b", "acme", Action.ADDED, "b")),
        projects=("acme",),
    )
    why = "forgotten at 2026-11-27T10:00:00+00:00; add it again with `ctxbus memory import --allow-forgotten`"
    answer = stored_answer(items, "acme", report, global_allowed=False, forgotten={("acme", "f"): why})
    assert [(r.id, r.action, r.reason) for r in answer.results] == [
        ("a", MemoryAction.ADDED, None),
        ("f", MemoryAction.REJECTED, why),
        ("b", MemoryAction.ADDED, None),
    ]
