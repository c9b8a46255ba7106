"""What ``ctxbus request`` says on stderr: why a context is empty (the floor's numbers, store size and best
candidate, from the retriever's notices) and, with ``--explain``, each ranked item's breakdown."""

from __future__ import annotations

from ctxbus.cli.request_explain import explain, why_empty
from ctxbus.core.abstain import Evidence, FloorPolicy, relevance

from ..core.test_inspection import chain


def test_an_empty_context_says_why_with_the_floors_numbers() -> None:
    done, injected = chain(context="")
    judged = relevance(Evidence((0.2, 0.1), 0.0, best_id="m-7", store_size=12), FloorPolicy(size_slope=0.04))
    assert judged is not None and not judged.passes
    notice = judged.explain()
    completed = done.payload.model_copy(update={"items": (), "notices": (notice,)})
    empty = injected.payload.model_copy(update={"empty_reason": "nothing_relevant_enough", "item_ids": ()})
    lines = why_empty(empty, completed)
    assert lines[0] == "no context: nothing_relevant_enough"
    assert "for 12 items" in lines[1] and "best candidate m-7" in lines[1] and "best cosine 0.200" in lines[1]


def test_a_context_needs_no_reason_and_a_lost_completed_event_is_said() -> None:
    done, injected = chain()
    assert why_empty(injected.payload, done.payload) == []
    empty = injected.payload.model_copy(update={"context": "", "empty_reason": "no_memories_in_project"})
    assert why_empty(empty, None)[0] == "no context: no_memories_in_project"
    assert "not seen" in why_empty(empty, None)[1]


def test_explain_lists_each_ranked_item_with_its_breakdown() -> None:
    done, injected = chain()
    lines = explain(injected.payload, done.payload)
    assert lines[0].startswith("explain: 2 ranked of 0 candidates")
    assert "1. a [pattern] score 0.800, injected" in lines[1]
    assert lines[2].strip() == "similarity 0.900"
    assert "2. b [warning] score 0.200, left out (budget)" in lines[3]
    assert explain(injected.payload, None) == ["explain: the retriever's completed event was not seen"]
