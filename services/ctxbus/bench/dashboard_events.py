"""The synthetic context-injected events ``ctxbus bench dashboard`` publishes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, ContextSource, RetrievalRequested, Trigger

PROJECTS = ("acme/web", "acme/api", "payments", "infra", "docs")
EMPTY_REASONS = ("no_memories_in_project", "nothing_relevant_enough", "empty_prompt")


def injected(i: int, *, now: datetime | None = None) -> Envelope[ContextInjected]:
    """A realistic injection: one in ten empty (with a reason), sizes and latencies varied by ``i``."""
    emitted = now or datetime.now(UTC)
    request = Envelope.root(
        RetrievalRequested(agent_name="claude-code", prompt=f"task {i}", trigger=Trigger.USER_PROMPT),
        project=PROJECTS[i % len(PROJECTS)],
        session_id=f"bench-session-{i % 37}",
        producer="bench",
        now=emitted - timedelta(milliseconds=20 + i % 60),
    )
    empty = i % 10 == 0
    context = "" if empty else "### A remembered pattern\n" + "Keep the retry budget bounded. " * (1 + i % 120)
    payload = ContextInjected(
        context_source=ContextSource.NONE if empty else ContextSource.RAG_QUERY,
        pattern_count=0 if empty else 1 + i % 5,
        context_size_bytes=len(context.encode()),
        retrieval_duration_ms=8 + i % 30,
        agent_name="claude-code",
        trigger=(Trigger.USER_PROMPT, Trigger.SESSION_START, Trigger.GAP)[i % 3],
        context=context,
        context_chars=len(context),
        token_estimate=len(context) // 4,
        item_ids=() if empty else tuple(f"m{i}-{k}" for k in range(1 + i % 5)),
        empty_reason=EMPTY_REASONS[i % len(EMPTY_REASONS)] if empty else None,
        assembly_duration_ms=0.3 + (i % 7) / 10,
        request_emitted_at=request.emitted_at,
    )
    return request.caused(payload, producer="bench", now=emitted)
