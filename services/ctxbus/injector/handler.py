"""Injector: completed retrieval -> markdown context within the budget -> context injected.

The budget is spent by the request's profile (seed 004), resolved from the completed event as the
retriever resolved it (profile name, the request's overrides, the task type): tier shares,
preserved items, compression (``ctxbus.core.budget``). What was shortened or left out, and why, is
logged, marks the event ``truncated`` (any text cut or compressed), and is in the prime document's
``budget``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

import structlog

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.handling import Output, PoisonEvent
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import (
    MAX_CONTEXT_BYTES,
    MAX_RETRIEVAL_MS,
    ContextInjected,
    ContextSource,
    RetrievalCompleted,
    RetrievalRequested,
)
from ctxbus.contract.topics import Topics
from ctxbus.core.assemble import Assembly, assemble
from ctxbus.core.budget import WHOLE_BUDGET, BudgetPlan, budget_plan, profile_from, tier_of
from ctxbus.core.fingerprint import (
    ContextFingerprint,
    as_injected,
    compression_kept,
    decode_components,
    encode_components,
)
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.precontext import PreContextPolicy, build_precontext
from ctxbus.core.prime import TaskContext, prime_document, to_json
from ctxbus.core.profiles import InvalidOverride, UnknownProfile
from ctxbus.core.ranked_items import to_ranked_hit
from ctxbus.core.ranking import RankedHit
from ctxbus.core.sections import SUGGESTED_APPROACH
from ctxbus.core.tokens import estimate_tokens
from ctxbus.injector.attempts import PRECONTEXT_TRIGGERS
from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.observability import Metrics
from ctxbus.settings import InjectionSettings

log = structlog.get_logger("ctxbus.injector")

SERVICE = "injector"


class InjectorHandler:
    def __init__(
        self,
        topics: Topics,
        metrics: Metrics,
        settings: InjectionSettings,
        *,
        clock: Callable[[], datetime],
        attempts: AttemptStore | None = None,
        precontext: PreContextPolicy | None = None,
        count_tokens: Callable[[str], int] = estimate_tokens,
        fence: Callable[[datetime | None], Awaitable[bool]] | None = None,
    ) -> None:
        """``fence``: awaited (with the request's deadline) before a pre-context is built, so it sees every attempt
        recorded before the request (ctxbus.injector.fence; the services' loop only)."""
        self._fence = fence
        self._topics = topics
        self._metrics = metrics
        self._settings = settings
        self._clock = clock
        self._attempts = attempts
        self._precontext = precontext or PreContextPolicy()
        self._count_tokens = count_tokens

    def _wants_pre_context(self, request: RetrievalRequested) -> bool:
        return request.trigger in PRECONTEXT_TRIGGERS and self._attempts is not None and bool(request.task_id)

    def _pre_context(self, project: str, request: RetrievalRequested) -> str:
        """Seed 003's pre-context for retry, fallback and helper requests that name their task: the
        attempts of that task in the request's project, none once an outcome ended the task."""
        kind = PRECONTEXT_TRIGGERS.get(request.trigger)
        if kind is None or self._attempts is None or not request.task_id:
            return ""
        task = self._attempts.task(project, request.task_id)
        if task.closed:
            return ""
        text = build_precontext(
            kind,
            task.attempts,
            self._precontext,
            enabled_for_task=task.override,
            provider=request.failed_provider,
            reason=request.failure_reason,
            count_tokens=self._count_tokens,
        )
        if text:
            self._metrics.precontext.labels(kind.value).inc()
        return text

    @staticmethod
    def _budget(completed: RetrievalCompleted) -> BudgetPlan:
        """The profile's budget plan, made as the retriever made its retrieval plan.

        A profile that does not resolve (the retriever would have dead-lettered the request, so only an
        event from elsewhere has one) leaves the budget one pool, and says so in the log.
        """
        request = completed.request
        try:
            profile = profile_from(completed.profile, request.profile_overrides)
            plan = plan_retrieval(
                profile,
                completed.task_type,
                request.prompt,
                request.mentioned_files,
                max_items=request.max_items,
                task_id=request.task_id,
            )
        except (UnknownProfile, InvalidOverride, ValueError) as exc:
            log.warning("profile_unresolved", profile=completed.profile, error=str(exc))
            return WHOLE_BUDGET
        return budget_plan(plan)

    def _fingerprint(
        self, completed: RetrievalCompleted, hits: Sequence[RankedHit], result: Assembly, tokens: int
    ) -> ContextFingerprint:
        """Seed 004's fingerprint of the context as injected: the retrieval's with the items, tokens, tiers,
        compression and tags of what the budget let in (``ctxbus.core.fingerprint.as_injected``)."""
        by_key = {(h.item.project, h.item.id): h for h in hits}
        chosen = [by_key[(i.project, i.id)] for i in result.items if (i.project, i.id) in by_key]
        ratio = 1.0  # nothing cut (the common case): no second count of the items' tokens on the request path
        if result.shortened:
            kept = sum(self._count_tokens(i.embedding_text()) for i in result.items)
            whole = sum(self._count_tokens(h.item.embedding_text()) for h in chosen)
            ratio = compression_kept(kept, whole)
        return as_injected(
            decode_components(completed.fingerprint_components),
            result.items,
            [tier_of(h, completed.request.task_id) for h in chosen],
            tokens=tokens,
            compression_ratio=ratio,
        )

    def _prime(
        self, completed: RetrievalCompleted, result: Assembly, text: str, empty_reason: str | None, fingerprint: str
    ) -> str:
        """Seed 001's prime_context document for the items this injection holds."""
        task = TaskContext(
            task_type=completed.task_type.value if completed.task_type else None,
            task_type_confidence=completed.task_type_confidence,
            domain=completed.domain or completed.request.domain,
            profile=completed.profile,
            fingerprint=fingerprint,
        )
        scores = {(i.project, i.id): i.score for i in completed.items}
        document = prime_document(
            task,
            result.items,
            scores,
            result.approach,
            token_count=self._count_tokens(text),
            truncated=result.shortened,
            empty_reason=empty_reason,
            budget=result.budget_report(),
        )
        return to_json(document)

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, RetrievalCompleted):
            raise PoisonEvent(f"the injector takes completed retrievals, not {event.event_type}")
        completed: RetrievalCompleted = event.payload
        request = completed.request
        if self._fence is not None and self._wants_pre_context(request):
            await self._fence(request.deadline)  # the pre-context reads every attempt recorded before the request
        started = time.perf_counter()
        try:
            hits = [to_ranked_hit(i) for i in completed.items]
        except ValueError as exc:
            raise PoisonEvent(f"a ranked item cannot be read as memory: {exc}") from exc
        max_chars = min(request.max_chars, self._settings.max_chars, MAX_CONTEXT_BYTES)
        max_tokens = min(request.max_tokens, self._settings.max_tokens)
        # the pre-context goes first (seed 003: at the start of the prompt) and counts against the budget
        pre = self._pre_context(event.project, request)[: max_chars // 2]
        result = assemble(
            hits,
            max_chars=max(1, max_chars - len(pre) - 1),
            max_tokens=max(1, max_tokens - self._count_tokens(pre)),
            count_tokens=self._count_tokens,
            include=request.includes,
            approach=request.includes(SUGGESTED_APPROACH),
            task_type=completed.task_type,
            budget=self._budget(completed),
        )
        text = f"{pre}\n{result.text}" if pre and result.text else pre or result.text
        # a multi-byte text may hold more bytes than characters: the byte bound is the contract's
        while len(text.encode("utf-8")) > MAX_CONTEXT_BYTES:
            text = text[: len(text) - (len(text.encode("utf-8")) - MAX_CONTEXT_BYTES)]
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        self._metrics.stage.labels(SERVICE, "assemble").observe(elapsed_ms / 1000.0)
        empty_reason = None
        if not text:
            empty_reason = completed.empty_reason or result.empty_reason
        token_estimate = self._count_tokens(text)
        mix = self._fingerprint(completed, hits, result, token_estimate)
        injected = ContextInjected(
            context_source=(
                ContextSource.RAG_QUERY
                if result.item_ids
                else ContextSource.SESSION_AGGREGATOR
                if pre
                else ContextSource.NONE
            ),
            pattern_count=len(result.item_ids),
            context_size_bytes=len(text.encode("utf-8")),
            agent_domain=completed.domain or request.domain,
            min_confidence_threshold=request.min_confidence,
            retrieval_duration_ms=min(round(completed.retrieval_duration_ms), MAX_RETRIEVAL_MS),
            agent_name=request.agent_name,
            agent_role=request.agent_role,
            trigger=request.trigger,
            context=text,
            context_chars=len(text),
            token_estimate=token_estimate,
            item_ids=tuple(result.item_ids),
            injection_target=request.injection_target,
            truncated=result.shortened,
            empty_reason=empty_reason,
            assembly_duration_ms=round(elapsed_ms, 3),
            request_emitted_at=completed.request_emitted_at,
            suggested_approach=result.approach.text,
            prime=self._prime(completed, result, text, empty_reason, mix.hash) if request.prime else None,
            task_id=request.task_id,
            global_item_ids=tuple(i.id for i in result.items if i.project == GLOBAL_PROJECT),
            fingerprint=mix.hash,
            fingerprint_components=encode_components(mix.components),
        )
        out = event.caused(injected, producer=SERVICE, now=self._clock())
        log.info(
            "injected",
            items=len(result.item_ids),
            chars=len(text),
            empty_reason=empty_reason,
            profile=result.profile,
            tiers={t.tier.value: f"{t.used}/{t.allocated}" for t in result.tiers},
            compressed=list(result.compressed),
            truncated=result.truncated,
            approach_dropped=result.approach_dropped,
            left_out=[f"{item_id}:{reason}" for item_id, reason in result.skipped],
        )
        return [Output(self._topics.context_injected, out)]
