"""Injector: completed retrieval -> markdown context within the budget -> context injected."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.runner import Output, PoisonEvent
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import (
    MAX_CONTEXT_BYTES,
    MAX_RETRIEVAL_MS,
    ContextInjected,
    ContextSource,
    RetrievalCompleted,
)
from ctxbus.contract.topics import Topics
from ctxbus.core.assemble import assemble
from ctxbus.core.ranked_items import to_ranked_hit
from ctxbus.observability import Metrics
from ctxbus.settings import InjectionSettings

log = structlog.get_logger("ctxbus.injector")

SERVICE = "injector"


class InjectorHandler:
    def __init__(
        self, topics: Topics, metrics: Metrics, settings: InjectionSettings, *, clock: Callable[[], datetime]
    ) -> None:
        self._topics = topics
        self._metrics = metrics
        self._settings = settings
        self._clock = clock

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, RetrievalCompleted):
            raise PoisonEvent(f"the injector takes completed retrievals, not {event.event_type}")
        completed: RetrievalCompleted = event.payload
        request = completed.request
        started = time.perf_counter()
        try:
            hits = [to_ranked_hit(i) for i in completed.items]
        except ValueError as exc:
            raise PoisonEvent(f"a ranked item cannot be read as memory: {exc}") from exc
        max_chars = min(request.max_chars, self._settings.max_chars, MAX_CONTEXT_BYTES)
        max_tokens = min(request.max_tokens, self._settings.max_tokens)
        result = assemble(hits, max_chars=max_chars, max_tokens=max_tokens)
        # a multi-byte text may hold more bytes than characters: the byte bound is the contract's
        text = result.text
        while len(text.encode("utf-8")) > MAX_CONTEXT_BYTES:
            text = text[: len(text) - (len(text.encode("utf-8")) - MAX_CONTEXT_BYTES)]
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        self._metrics.stage.labels(SERVICE, "assemble").observe(elapsed_ms / 1000.0)
        empty_reason = None
        if not result.item_ids:
            empty_reason = completed.empty_reason or result.empty_reason or "nothing_fit_the_budget"
        injected = ContextInjected(
            context_source=ContextSource.RAG_QUERY if result.item_ids else ContextSource.NONE,
            pattern_count=len(result.item_ids),
            context_size_bytes=len(text.encode("utf-8")),
            agent_domain=request.domain,
            min_confidence_threshold=request.min_confidence,
            retrieval_duration_ms=min(round(completed.retrieval_duration_ms), MAX_RETRIEVAL_MS),
            agent_name=request.agent_name,
            agent_role=request.agent_role,
            trigger=request.trigger,
            context=text,
            context_chars=len(text),
            token_estimate=result.tokens,
            item_ids=tuple(result.item_ids),
            injection_target=request.injection_target,
            truncated=result.truncated,
            empty_reason=empty_reason,
            assembly_duration_ms=round(elapsed_ms, 3),
            request_emitted_at=completed.request_emitted_at,
        )
        out = event.caused(injected, producer=SERVICE, now=self._clock())
        log.info("injected", items=len(result.item_ids), chars=len(text), empty_reason=empty_reason)
        return [Output(self._topics.context_injected, out)]
