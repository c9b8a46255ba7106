"""The injector's answer when a request has expired: an expired completion is passed on as an empty
injection (``empty_reason=expired``), and so is a completion whose request's deadline passed before it
could be assembled (see ``ctxbus.core.deadlines``). Nothing is assembled for either."""

from __future__ import annotations

from datetime import datetime

import structlog

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted
from ctxbus.core.deadlines import EXPIRED, expired_injection, is_expired, remaining_s
from ctxbus.observability import Metrics

log = structlog.get_logger("ctxbus.injector")


def answer_if_expired(
    event: Envelope[RetrievalCompleted], *, now: datetime, metrics: Metrics, service: str
) -> Envelope[ContextInjected] | None:
    """The ``expired`` injection for ``event`` when it came expired or its deadline is reached at ``now``."""
    completed = event.payload
    if completed.empty_reason != EXPIRED:
        if not is_expired(completed.request.deadline, now):
            return None
        # found so here: counted here (an expired completion was counted by the retriever)
        metrics.requests_expired.labels(service).inc()
        late_s = -(remaining_s(completed.request.deadline, now) or 0.0)
        log.info(
            "retrieval_expired", project=event.project, items=len(completed.items), late_ms=round(late_s * 1000, 1)
        )
    return event.caused(expired_injection(completed), producer=service, now=now)
