"""Opening one injection: both halves of a chain, either missing, bounded texts, a bounded store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    RankedItem,
    RetrievalCompleted,
    RetrievalRequested,
    Trigger,
)
from ctxbus.core.inspection import CONTEXT_CHARS, PROMPT_CHARS, inspect_chain, render_text
from ctxbus.dashboard.inspections import InspectionStore


def chain(
    prompt: str = "Fix login", context: str = "### A\nB"
) -> tuple[Envelope[RetrievalCompleted], Envelope[ContextInjected]]:
    now = datetime.now(UTC)
    request = RetrievalRequested(agent_name="cc", prompt=prompt, trigger=Trigger.USER_PROMPT)
    root = Envelope.root(request, project="p", session_id="s", producer="t", now=now - timedelta(milliseconds=30))
    items = (
        RankedItem(
            id="a", project="p", kind="pattern", content="A", confidence=0.9, score=0.8, breakdown={"similarity": 0.9}
        ),
        RankedItem(id="b", project="p", kind="warning", content="B" * 5_000, confidence=0.5, score=0.2),
    )
    done = root.caused(
        RetrievalCompleted(
            request=request,
            request_emitted_at=root.emitted_at,
            items=items,
            retrieval_duration_ms=3.0,
            embedding_model="m",
        ),
        producer="retriever",
    )
    injected = done.caused(
        ContextInjected(
            context_source=ContextSource.RAG_QUERY,
            pattern_count=1,
            context_size_bytes=len(context),
            retrieval_duration_ms=3,
            agent_name="cc",
            trigger=Trigger.USER_PROMPT,
            context=context,
            context_chars=len(context),
            token_estimate=3,
            item_ids=("a",),
            request_emitted_at=root.emitted_at,
        ),
        producer="injector",
        now=now,
    )
    return done, injected


def test_both_halves_say_which_ranked_items_the_context_carried() -> None:
    done, injected = chain()
    doc = inspect_chain(str(done.correlation_id), done, injected)
    assert doc["missing"] == []
    assert [(i["id"], i["injected"]) for i in doc["retrieval"]["items"]] == [("a", True), ("b", False)]
    assert doc["retrieval"]["items"][1]["content"]["omitted_chars"] == 5_000 - 600
    assert doc["injection"]["end_to_end_ms"] == 30.0
    text = render_text(doc)
    assert "1. 0.800  pattern    a  injected" in text and "left out" in text and "### A" in text


def test_a_missing_half_is_named_and_long_texts_are_bounded() -> None:
    done, injected = chain(prompt="x" * (PROMPT_CHARS + 10), context="y" * (CONTEXT_CHARS + 5))
    only_injected = inspect_chain("c", None, injected)
    assert only_injected["missing"] == ["completed"] and only_injected["retrieval"] is None
    assert only_injected["injection"]["context"]["omitted_chars"] == 5
    only_completed = inspect_chain("c", done, None)
    assert only_completed["missing"] == ["injected"]
    assert "injected" not in only_completed["retrieval"]["items"][0]  # unknown, not "left out"
    assert only_completed["retrieval"]["request"]["prompt"]["omitted_chars"] == 10
    assert "not read" in render_text(only_completed)


def test_the_store_keeps_the_latest_chains_only() -> None:
    store = InspectionStore(max_chains=2)
    chains = [chain() for _ in range(3)]
    for done, injected in chains:
        store.add_completed(done)
        store.add_injected(injected)
    assert len(store) == 2
    assert store.get(str(chains[0][0].correlation_id)) is None
    latest = store.get(str(chains[2][0].correlation_id))
    assert latest is not None and latest["missing"] == []


def test_the_injection_says_its_source_confidence_floor_and_fingerprint() -> None:
    """Issue 25: ``min_confidence_threshold`` was only echoed; the inspector (dashboard, ``replay
    --correlation-id``) shows it, with the source and the injected context's fingerprint."""
    done, injected = chain()
    payload = injected.payload.model_copy(
        update={"min_confidence_threshold": 0.5, "fingerprint": "0123abcd", "context_source": ContextSource.NONE}
    )
    doc = inspect_chain(str(done.correlation_id), done, injected.model_copy(update={"payload": payload}))
    part = doc["injection"]
    assert (part["min_confidence"], part["fingerprint"], part["source"]) == (0.5, "0123abcd", "none")
    assert "source none, min confidence 0.50, fingerprint 0123abcd" in render_text(doc)


def test_the_text_names_why_a_chain_is_empty_its_notices_and_the_near_copies_left_out() -> None:
    done, injected = chain(context="")
    items = (done.payload.items[0].model_copy(update={"collapsed_ids": ("a2", "a3")}),)
    completed = done.model_copy(
        update={
            "payload": done.payload.model_copy(
                update={"items": items, "empty_reason": "nothing_relevant_enough", "notices": ("query_truncated",)}
            )
        }
    )
    empty = injected.model_copy(
        update={"payload": injected.payload.model_copy(update={"item_ids": (), "empty_reason": "budget_too_small"})}
    )
    text = render_text(inspect_chain(str(done.correlation_id), completed, empty))
    assert "nothing retrieved: nothing_relevant_enough" in text and "notice: query_truncated" in text
    assert "near copies left out: a2, a3" in text and "empty: budget_too_small" in text
    only_injected = render_text(inspect_chain("c", None, empty))
    assert "retrieval: not read (the retrieval-completed event is missing)" in only_injected
