from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    CurationAction,
    MemoryAction,
    MemoryCurated,
    MemoryStored,
    MemoryStoreResult,
    RankedItem,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)


@pytest.fixture
def request_event() -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(
        agent_name="claude-code",
        agent_role="implementer",
        domain="auth",
        task_type=TaskType.BUGFIX,
        prompt="Fix login after password reset",
        mentioned_files=("src/auth/login.py",),
        trigger=Trigger.USER_PROMPT,
        strict_domain=True,
        deadline=datetime(2026, 11, 23, 10, 0, 2, 500_000, tzinfo=UTC),
    )
    return Envelope.root(payload, project="acme/web", session_id="sess-1", producer="test")


@pytest.fixture
def completed_event(request_event: Envelope[RetrievalRequested]) -> Envelope[RetrievalCompleted]:
    item = RankedItem(
        id="p1",
        project="acme/web",
        kind="pattern",
        title="Token refresh",
        content="Refresh tokens before expiry",
        domains=("auth",),
        confidence=0.9,
        success_rate=0.8,
        score=0.77,
        breakdown={"similarity": 0.8, "total": 0.77},
        cluster_id="c-1",
        collapsed_ids=("p9",),
    )
    payload = RetrievalCompleted(
        request=request_event.payload,
        request_emitted_at=request_event.emitted_at,
        items=(item,),
        retrieval_duration_ms=3.5,
        embedding_model="m",
        domain="auth",
        domain_source="request",
    )
    return request_event.caused(payload, producer="retriever")


@pytest.fixture
def stored_event() -> Envelope[MemoryStored]:
    payload = MemoryStored(
        results=(
            MemoryStoreResult(id="a", project="acme/web", action=MemoryAction.ADDED, cluster_id="a"),
            MemoryStoreResult(id="b", project="acme/web", action=MemoryAction.MERGED, into="a"),
            MemoryStoreResult(id="g", project="__global__", action=MemoryAction.REJECTED, reason="why"),
        ),
        superseded=("old",),
    )
    return Envelope.root(payload, project="acme/web", session_id="import", producer="retriever")


@pytest.fixture
def injected_event(completed_event: Envelope[RetrievalCompleted]) -> Envelope[ContextInjected]:
    payload = ContextInjected(
        context_source=ContextSource.RAG_QUERY,
        pattern_count=1,
        context_size_bytes=40,
        retrieval_duration_ms=3,
        agent_name="claude-code",
        trigger=Trigger.USER_PROMPT,
        context="## Learned Patterns\n\n### Token refresh\n",
        context_chars=40,
        token_estimate=12,
        item_ids=("p1",),
    )
    return completed_event.caused(payload, producer="injector")


@pytest.fixture
def curated_event() -> Envelope[MemoryCurated]:
    payload = MemoryCurated(action=CurationAction.PIN, ids=("a", "b"), note="the team's rule")
    return Envelope.root(payload, project="acme/web", session_id="memory-curation", producer="cli")
