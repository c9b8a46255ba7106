"""A member whose memory loop lags its learning loops (a member that joined late and reads every topic from the
start) must end with the same feedback as one that stored the item first: an item stored after the outcomes
that count for it gets its learned counts when it is stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    MemoryUpserted,
    Outcome,
    OutcomeRecorded,
    Trigger,
)
from ctxbus.contract.topics import Topics
from ctxbus.learning.handler import LearningHandler, relearn
from ctxbus.memory.model import Feedback, MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.retriever.memory_upserts import MemoryUpsertHandler

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ITEM = MemoryItem(id="late", project=PROJECT, kind=MemoryKind.PATTERN, title="Late", content="Stored late.")


def events() -> tuple[AnyEnvelope, AnyEnvelope, AnyEnvelope]:
    upsert = Envelope.root(MemoryUpserted(items=(ITEM,)), project=PROJECT, session_id="m", producer="t", now=AT)
    injected = ContextInjected(
        context_source=ContextSource.RAG_QUERY,
        pattern_count=1,
        context_size_bytes=4,
        retrieval_duration_ms=1,
        agent_name="a",
        trigger=Trigger.USER_PROMPT,
        context="late",
        context_chars=4,
        token_estimate=1,
        item_ids=("late",),
    )
    injection = Envelope.root(injected, project=PROJECT, session_id="s", producer="t", now=AT + timedelta(seconds=1))
    outcome = Envelope.root(
        OutcomeRecorded(outcome=Outcome.SUCCESSFUL, source="t"),
        project=PROJECT,
        session_id="s",
        producer="t",
        now=AT + timedelta(seconds=2),
    )
    return upsert, injection, outcome


async def feedback_in_order(tmp: Path, embedder: Embedder, memory_first: bool) -> Feedback:
    store = EdgeVectorStore(tmp / "store", model_id=embedder.model_id, dim=embedder.dim)
    ledger, curation = LearningLedger(tmp / "learning.sqlite3"), CurationLedger(tmp / "curation.sqlite3")
    try:
        learning = LearningHandler(ledger, store)
        memory = MemoryUpsertHandler(embedder, store, Topics("t"), curation, learned=relearn(ledger, store))
        upsert, injection, outcome = events()
        if memory_first:
            await memory(upsert)
        await learning.injections(injection)
        await learning.outcomes(outcome)
        if not memory_first:
            await memory(upsert)
        (item,) = store.items(PROJECT)
        return item.feedback
    finally:
        store.close()
        ledger.close()
        curation.close()


async def test_an_item_stored_after_its_outcomes_gets_their_counts(tmp_path: Path, embedder: Embedder) -> None:
    first = await feedback_in_order(tmp_path / "first", embedder, memory_first=True)
    late = await feedback_in_order(tmp_path / "late", embedder, memory_first=False)
    assert first == Feedback(uses=1, successes=1)
    assert late == first
