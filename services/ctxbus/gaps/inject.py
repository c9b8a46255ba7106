"""Filling a context gap from its four sources: detect, gather the state's own context, request
memory through the bus (trigger ``gap``), compose, write into a copy of the state.

:func:`fill_gap` reads an agent state document, detects a gap with :mod:`ctxbus.core.gaps`
(semantic repetition measured with the embedder's cosine), picks the state's relevant decisions
and messages and its sprint and architecture texts (:mod:`ctxbus.core.gap_sources`, within their
share of the budget), publishes a ``RetrievalRequested`` with ``trigger=gap``, the state's injection
target and the rest of the budget, waits for the ``ContextInjected`` of its correlation id, and
returns a *copy* of the state with the labelled context written into the target key and an entry
appended to ``injection_log``. Every injection is also logged (structlog). The input state is never
mutated.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.agent_state import AgentState, parse_state
from ctxbus.core.deadlines import deadline_for, with_deadline
from ctxbus.core.gap_sources import SourcePolicy, compose, plan_local
from ctxbus.core.gaps import Gap, GapAssessment, GapPolicy, Similarity, assess_gap
from ctxbus.gaps.result import NO_BROKER, GapResult, GapStatus, apply_injection
from ctxbus.ports import Embedder, Vector
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

log = structlog.get_logger("ctxbus.gaps")

#: The producer name on gap requests.
PRODUCER = "gaps"
#: Seconds :func:`fill_gap` waits for the injection by default.
DEFAULT_TIMEOUT_S = 10.0
#: The agent name sent when the state names none (the request needs one).
UNKNOWN_AGENT = "unknown"
#: The role sent when the state names none (the contract's default).
DEFAULT_ROLE = "implementer"


class GapInputError(ValueError):
    """The state lacks what a request needs (its project or session): ``missing`` names them."""

    def __init__(self, message: str, missing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.missing = missing


class GapInjectionTimeout(TimeoutError):
    """No injection arrived in time; the state was not changed."""

    def __init__(self, gap: Gap, correlation_id: uuid.UUID, timeout_s: float) -> None:
        super().__init__(
            f"no injection within {timeout_s:g} s for the {gap.reason.value} gap "
            f"(correlation {correlation_id}): is the stack running?"
        )
        self.gap = gap
        self.correlation_id = correlation_id
        self.timeout_s = timeout_s


class EmbeddingSimilarity:
    """Cosine similarity of two texts' embeddings; each text is embedded once."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vectors: dict[str, Vector] = {}

    def prime(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` in one batch (those not seen yet)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed(missing), strict=True))

    def __call__(self, a: str, b: str) -> float:
        self.prime([a, b])
        va, vb = self._vectors[a], self._vectors[b]
        norm = math.sqrt(sum(x * x for x in va)) * math.sqrt(sum(y * y for y in vb))
        return sum(x * y for x, y in zip(va, vb, strict=True)) / norm if norm else 0.0


def assess(
    state: AgentState, policy: GapPolicy, embedder: Embedder, *, now: datetime, gap_id: str | None = None
) -> GapAssessment:
    """Detect a gap, measuring semantic repetition with ``embedder`` (agent messages embedded in one batch)."""
    similarity = EmbeddingSimilarity(embedder)
    spoken = [m.content for m in state.messages if m.from_agent and m.content.strip()]
    similarity.prime(spoken[-policy.circular_window :])  # the messages the repetition check compares
    semantic: Similarity = similarity
    return assess_gap(state, policy, semantic, now=now, gap_id=gap_id)


def gap_request(
    gap: Gap, state: AgentState, settings: Settings, *, max_chars: int | None = None, max_tokens: int | None = None
) -> RetrievalRequested:
    """The retrieval request for a gap: its query, hints and target, the configured budget (or the part
    of it left to memory)."""
    q = gap.query
    return RetrievalRequested(
        agent_name=gap.agent or UNKNOWN_AGENT,
        agent_role=state.agent_role or DEFAULT_ROLE,
        domain=q.domain,
        task_type=q.task_type,
        prompt=q.text,
        mentioned_files=q.mentioned_files,
        max_tokens=max_tokens or settings.injection.max_tokens,
        max_chars=max_chars or settings.injection.max_chars,
        max_items=settings.injection.max_items,
        trigger=Trigger.GAP,
        injection_target=gap.target,
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


async def fill_gap(
    state: Mapping[str, Any],
    *,
    settings: Settings,
    embedder: Embedder | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    policy: GapPolicy | None = None,
    sources: SourcePolicy | None = None,
    project: str | None = None,
    session_id: str | None = None,
    clock: Callable[[], datetime] = _utc_now,
) -> GapResult:
    """Detect a gap in ``state`` and, if there is one, fill it from the state's own context and the
    project's memory (asked of the running pipeline), within the configured injection budget.

    ``project``/``session_id`` override the state's. With no broker to connect to (``ctxbus.runtime.NoBroker``)
    the gap is filled from the state's own sources alone, with the whole budget (seed 000: the memory store is
    optional); the log entry's ``memory_empty_reason`` says ``no_broker``. Raises
    :class:`~ctxbus.core.gaps.StateError` (bad state), :class:`GapInputError` (a gap but no project or session)
    and :class:`GapInjectionTimeout`; the input is never changed.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    started = time.perf_counter()
    parsed = parse_state(state)
    if embedder is None:
        from ctxbus.components import open_embedder  # noqa: PLC0415  (loads the model)

        embedder = await asyncio.to_thread(open_embedder, settings)
    assessment = await asyncio.to_thread(assess, parsed, policy or GapPolicy(), embedder, now=clock())
    gap = assessment.gap
    if gap is None:
        log.info("gap_not_found", why=assessment.why, confidence=round(assessment.confidence, 4))
        duration_ms = _since(started)
        return GapResult(GapStatus.NO_GAP, copy.deepcopy(dict(state)), assessment.why, duration_ms=duration_ms)
    project = (project or parsed.project or "").strip()
    session = (session_id or parsed.session_id or "").strip()
    if not project or not session:
        missing = tuple(n for n, v in (("project", project), ("session_id", session)) if not v)
        raise GapInputError(
            f"a {gap.reason.value} gap was found but the state has no {' and '.join(missing)} to request with", missing
        )
    max_chars, max_tokens, count = settings.injection.max_chars, settings.injection.max_tokens, embedder.count_tokens
    local_policy = sources or SourcePolicy()
    try:
        config: KafkaClientConfig | None = kafka_config(settings)
    except NoBroker as exc:  # seed 000: the memory store is optional; the state's own sources still answer
        log.warning("gap_without_broker", project=project, error=str(exc))
        config, local_policy = None, replace(local_policy, local_share=1.0)
    plan = plan_local(parsed, gap, local_policy, max_chars=max_chars, max_tokens=max_tokens, count_tokens=count)
    injected: Envelope[ContextInjected] | None = None
    correlation_id: uuid.UUID | None = None
    if config is not None:
        request = gap_request(gap, parsed, settings, max_chars=plan.memory_chars, max_tokens=plan.memory_tokens)
        now = datetime.now(UTC)  # the request's deadline: when this call stops waiting (real time, not ``clock``)
        request = with_deadline(request, deadline_for(now, timeout_s))
        event = Envelope.root(request, project=project, session_id=session, producer=PRODUCER, now=now)
        correlation_id = event.correlation_id
        injected = await _request(config, settings, event, gap, timeout_s)
    item_ids = injected.payload.item_ids if injected is not None else ()
    memory_empty = injected.payload.empty_reason if injected is not None else NO_BROKER
    memory = injected.payload.context if injected is not None and item_ids else ""
    composed = compose(
        memory,
        plan.snippets,
        max_chars=max_chars,
        max_tokens=max_tokens,
        count_tokens=count,
        memory_items=len(item_ids),
    )
    duration_ms = _since(started)
    new_state, entry = apply_injection(state, gap, injected, composed, clock(), duration_ms)
    status = GapStatus.INJECTED if composed.text else GapStatus.EMPTY
    log.info(
        "gap_context_injected" if composed.text else "gap_context_empty",
        project=project,
        session_id=session,
        gap_id=gap.gap_id,
        agent=gap.agent,
        gap_reason=gap.reason.value,
        confidence=round(gap.confidence, 4),
        correlation_id=str(correlation_id) if correlation_id else None,
        target=gap.target,
        item_ids=list(item_ids),
        sources=entry["sources"],
        chars=entry["chars"],
        bytes=entry["bytes"],
        duration_ms=duration_ms,
        empty_reason=memory_empty,
    )
    if not composed.text:
        why = f"{assessment.why}; nothing injected: {memory_empty}"
    elif not item_ids:
        why = f"{assessment.why}; from the state only (memory: {memory_empty})"
    else:
        why = assessment.why
    return GapResult(
        status,
        new_state,
        why,
        gap=gap,
        target=gap.target,
        correlation_id=correlation_id,
        item_ids=item_ids,
        context_chars=entry["chars"],
        context_bytes=entry["bytes"],
        duration_ms=duration_ms,
        sources=composed.counts(),
        log_entry=entry,
    )


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


async def _request(
    config: KafkaClientConfig, settings: Settings, event: Envelope[RetrievalRequested], gap: Gap, timeout_s: float
) -> Envelope[ContextInjected]:
    topics = Topics(settings.topic_prefix)
    try:
        return await request_injection(config, topics, event, timeout_s, client_id=PRODUCER)
    except TimeoutError as exc:
        log.warning("gap_injection_timeout", correlation_id=str(event.correlation_id), timeout_s=timeout_s)
        raise GapInjectionTimeout(gap, event.correlation_id, timeout_s) from exc
