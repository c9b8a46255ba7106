"""Near copies collapse into the best of their cluster for an injected context: the places and the budget go to
distinct content, the copies are named, and search results (collapse off) keep every item."""

from __future__ import annotations

from ctxbus.core.assemble import assemble
from ctxbus.core.collapse import collapse_near_copies
from ctxbus.core.ranked_items import to_payload_item, to_ranked_hit
from ctxbus.core.ranking import RankedHit
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind


def hit(item_id: str, score: float, cluster: str | None = None, project: str = "p", content: str = "") -> RankedHit:
    item = MemoryItem(
        id=item_id,
        project=project,
        kind=MemoryKind.LEARNING,
        title=item_id,
        content=content or f"Memory {item_id}: what happened and what we learned from it.",
        cluster_id=cluster,
    )
    return RankedHit(item=item, score=score)


def test_one_item_per_cluster_its_copies_named_and_the_freed_places_filled() -> None:
    hits = [
        hit("a", 0.9),  # founded cluster "a" (no cluster id of its own)
        hit("a2", 0.85, "a"),
        hit("b", 0.8),
        hit("a3", 0.7, "a"),
        hit("c", 0.6, "c"),
        hit("d", 0.5),
        hit("e", 0.4),
        hit("a4", 0.3, "a"),  # below the cut, still a copy of the kept one
    ]
    kept = collapse_near_copies(hits, 4)
    assert [(h.item.id, h.collapsed_ids) for h in kept] == [("a", ("a2", "a3", "a4")), ("b", ()), ("c", ()), ("d", ())]
    assert [h.item.id for h in collapse_near_copies(hits, 4, collapse=False)] == ["a", "a2", "b", "a3"]


def test_the_best_ranked_member_is_kept_whichever_founded_the_cluster() -> None:
    kept = collapse_near_copies([hit("copy", 0.9, "founder"), hit("founder", 0.5)], 10)
    assert [(h.item.id, h.collapsed_ids) for h in kept] == [("copy", ("founder",))]


def test_clusters_are_per_project_and_items_without_one_are_their_own() -> None:
    hits = [hit("x", 0.9, "k"), hit("y", 0.8, "k", project=GLOBAL_PROJECT), hit("k", 0.7), hit("z", 0.6)]
    kept = collapse_near_copies(hits, 10)
    assert [(h.item.project, h.item.id, h.collapsed_ids) for h in kept] == [
        ("p", "x", ("k",)),
        (GLOBAL_PROJECT, "y", ()),
        ("p", "z", ()),
    ]


def test_the_context_budget_goes_to_distinct_content() -> None:
    copies = [
        hit(f"keys{n}", 0.9 - n / 100, "keys0" if n else None, content=f"Rotate signing keys (v{n}).") for n in range(4)
    ]
    detail = " Measured twice, written down in the runbook, and checked in review before every release."
    others = [
        hit(name, 0.5 - n / 100, content=name + detail * 2) for n, name in enumerate(("retries", "paging", "tls"))
    ]
    ranked = [*copies, *others]
    budget = len(assemble([copies[0], *others]).text)  # room for one copy and the three others
    collapsed = assemble(collapse_near_copies(ranked, 10), max_chars=budget)
    plain = assemble(collapse_near_copies(ranked, 10, collapse=False), max_chars=budget)
    assert collapsed.item_ids == ("keys0", "retries", "paging", "tls")
    assert plain.item_ids[:4] == ("keys0", "keys1", "keys2", "keys3") and len(plain.item_ids) < 7  # copies crowd out
    # and the item places: four places hold four distinct memories, not one memory four times
    assert [h.item.id for h in collapse_near_copies(ranked, 4)] == ["keys0", "retries", "paging", "tls"]
    assert [h.item.id for h in collapse_near_copies(ranked, 4, collapse=False)] == ["keys0", "keys1", "keys2", "keys3"]


def test_cluster_and_collapsed_ids_travel_in_the_completed_event() -> None:
    (kept,) = collapse_near_copies([hit("a", 0.9), hit("b", 0.8, "a")], 5)
    wire = to_payload_item(kept)
    assert (wire.cluster_id, wire.collapsed_ids) == ("a", ("b",))
    back = to_ranked_hit(wire)
    assert back.collapsed_ids == ("b",) and back.item.cluster == "a"
    assert to_payload_item(hit("solo", 0.5)).cluster_id == "solo"  # no cluster id: its own cluster
