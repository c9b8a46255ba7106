"""A member whose memory loop lags its learning loops (a member that joined late and reads every topic from the
start) must end with the same feedback as one that stored the item first: an item stored after the outcomes
that count for it gets its learned counts when it is stored."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

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
from ctxbus.ports import Embedder, VectorStore
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


class FirstFeedbackWriteLate:
    """The real store; its first feedback write arrives late (as a busy worker thread's may)."""

    def __init__(self, store: EdgeVectorStore) -> None:
        self.store = store
        self.writes = 0

    def set_feedback(self, project: str, feedback: Mapping[str, Feedback]) -> int:
        self.writes += 1
        if self.writes == 1:
            time.sleep(0.5)
        return self.store.set_feedback(project, feedback)


async def test_a_late_write_of_older_counts_never_wins(tmp_path: Path, embedder: Embedder) -> None:
    """Two loops learn at once: the counts of the later fact are written last, whatever the threads' pace (an
    outcome's write that lost the race once left a joining member one outcome short)."""
    store = EdgeVectorStore(tmp_path / "store", model_id=embedder.model_id, dim=embedder.dim)
    ledger = LearningLedger(tmp_path / "learning.sqlite3")
    try:
        store.upsert([ITEM], [embedder.embed_query(ITEM.embedding_text())])
        learning = LearningHandler(ledger, cast("VectorStore", FirstFeedbackWriteLate(store)))
        _, injection, outcome = events()
        await learning.injections(injection)
        later = outcome.model_copy(update={"event_id": uuid.uuid4(), "emitted_at": AT + timedelta(seconds=3)})
        first = asyncio.create_task(learning.outcomes(outcome))  # its write is held back
        await asyncio.sleep(0.1)
        await learning.outcomes(later)
        await first
        (item,) = store.items(PROJECT)
        assert item.feedback == Feedback(uses=2, successes=2)
    finally:
        store.close()
        ledger.close()
