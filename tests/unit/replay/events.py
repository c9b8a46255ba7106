"""Real events for the replay's unit tests: built with the contract's models, encoded by its serde."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    Outcome,
    OutcomeRecorded,
    OutcomeScope,
    RankedItem,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)
from ctxbus.contract.serde import EventSerializer
from ctxbus.contract.topics import Topics
from ctxbus.replay.facts import RawRecord

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TOPICS = Topics("t")
serialize = EventSerializer()


def ranked(item_id: str, score: float = 0.5, kind: str = "pattern") -> RankedItem:
    return RankedItem(
        id=item_id,
        project="acme/web",
        kind=kind,
        title=f"title {item_id}",
        content=f"content of {item_id}",
        domains=("auth",),
        confidence=0.8,
        score=score,
        breakdown={"similarity": 0.7, "domain": 1.0, "total": score},
    )


def chain(
    *,
    session: str = "s1",
    at: datetime = T0,
    retrieved: tuple[str, ...] = ("a", "b", "c"),
    injected: tuple[str, ...] = ("a", "b"),
    retrieval_ms: float = 20.0,
    assembly_ms: float = 2.0,
    stage_ms: tuple[int, int] = (30, 5),
    tokens: int = 120,
    role: str = "implementer",
    task_type: TaskType | None = TaskType.BUGFIX,
    task_id: str | None = None,
    project: str = "acme/web",
    empty_reason: str | None = None,
    fingerprint: str = "fp1",
) -> tuple[Envelope[RetrievalRequested], Envelope[RetrievalCompleted], Envelope[ContextInjected]]:
    """A request, its completion (``stage_ms[0]`` later) and its injection (``stage_ms[1]`` after that)."""
    req = Envelope.root(
        RetrievalRequested(
            agent_name="claude-code",
            agent_role=role,
            prompt="Fix login after password reset",
            trigger=Trigger.USER_PROMPT,
            task_type=task_type,
            task_id=task_id,
        ),
        project=project,
        session_id=session,
        producer="test",
        now=at,
    )
    done_at = at + timedelta(milliseconds=stage_ms[0])
    done = req.caused(
        RetrievalCompleted(
            request=req.payload,
            request_emitted_at=at,
            items=tuple(ranked(i) for i in retrieved),
            candidates_considered=len(retrieved) * 3,
            retrieval_duration_ms=retrieval_ms,
            embedding_model="test",
            empty_reason=None if retrieved else "nothing_relevant_enough",
            profile=role,
            task_type=task_type,
            fingerprint=fingerprint,
        ),
        producer="retriever",
        now=done_at,
    )
    text = "x" * (tokens * 4) if injected else ""
    inj = done.caused(
        ContextInjected(
            context_source=ContextSource.RAG_QUERY if injected else ContextSource.NONE,
            pattern_count=len(injected),
            context_size_bytes=len(text),
            retrieval_duration_ms=round(retrieval_ms),
            agent_name="claude-code",
            agent_role=role,
            trigger=Trigger.USER_PROMPT,
            context=text,
            context_chars=len(text),
            token_estimate=tokens if injected else 0,
            item_ids=injected,
            empty_reason=empty_reason if not injected else None,
            assembly_duration_ms=assembly_ms,
            request_emitted_at=at,
            task_id=task_id,
        ),
        producer="injector",
        now=done_at + timedelta(milliseconds=stage_ms[1]),
    )
    return req, done, inj


def outcome(
    outcome: Outcome,
    *,
    session: str = "s1",
    at: datetime,
    project: str = "acme/web",
    scope: OutcomeScope = OutcomeScope.SESSION,
    task_id: str | None = None,
    correlation: Envelope[RetrievalRequested] | None = None,
) -> Envelope[OutcomeRecorded]:
    return Envelope.root(
        OutcomeRecorded(outcome=outcome, scope=scope, task_id=task_id, source="test"),
        project=project,
        session_id=session,
        producer="test",
        now=at,
        correlation_id=correlation.correlation_id if correlation is not None else None,
    )


TOPIC_OF = {
    "context.retrieval.requested": TOPICS.retrieval_requested,
    "context.retrieval.completed": TOPICS.retrieval_completed,
    "context.injected": TOPICS.context_injected,
    "context.outcome.recorded": TOPICS.outcome_recorded,
}


def raw(event: Envelope, offset: int = 0, topic: str | None = None) -> RawRecord:  # type: ignore[type-arg]
    """The record the reader would hand over for ``event``, on its own topic unless ``topic`` is given."""
    return RawRecord(
        topic or TOPIC_OF[event.event_type],
        0,
        offset,
        int(event.emitted_at.timestamp() * 1000),
        serialize(event),  # type: ignore[arg-type]
    )
