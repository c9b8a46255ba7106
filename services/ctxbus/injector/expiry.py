"""The injector's deadlines: an expired completion is passed on as an empty injection (``empty_reason=expired``),
and so is a completion whose request's deadline passed before it could be assembled. Nothing is assembled for
either (see ``ctxbus.core.deadlines``). It wraps the injector handler in the service's consumer loop only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.handling import Handler, Output
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import RetrievalCompleted
from ctxbus.core.deadlines import EXPIRED, PAST_DEADLINE, expired_injection, is_expired, remaining_s
from ctxbus.observability import Metrics

log = structlog.get_logger("ctxbus.injector")

SERVICE = "injector"


class InjectorDeadlines:
    def __init__(self, inner: Handler, *, topic: str, metrics: Metrics, clock: Callable[[], datetime]) -> None:
        self._inner = inner
        self._topic = topic
        self._metrics = metrics
        self._clock = clock

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        completed = event.payload
        if not isinstance(completed, RetrievalCompleted):
            return await self._inner(event)  # it says what is wrong with it
        now = self._clock()
        if completed.empty_reason != EXPIRED:
            if not is_expired(completed.request.deadline, now):
                return await self._inner(event)
            # found so here: counted here (an expired completion was counted by the retriever)
            self._metrics.requests_expired.labels(SERVICE, PAST_DEADLINE).inc()
            late_ms = -(remaining_s(completed.request.deadline, now) or 0.0) * 1000
            log.info("retrieval_expired", project=event.project, items=len(completed.items), late_ms=round(late_ms, 1))
        injected = event.caused(expired_injection(completed), producer=SERVICE, now=now)
        return [Output(self._topic, injected)]
