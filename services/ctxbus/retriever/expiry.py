"""The retriever's answer to a request whose deadline has passed: at once, with no embedding, search or
ranking (see ``ctxbus.core.deadlines``)."""

from __future__ import annotations

from datetime import datetime

import structlog

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalCompleted, RetrievalRequested
from ctxbus.core.deadlines import expired_completion, is_expired, remaining_s
from ctxbus.observability import Metrics

log = structlog.get_logger("ctxbus.retriever")


def answer_if_expired(
    event: Envelope[RetrievalRequested],
    *,
    now: datetime,
    profile: str,
    embedding_model: str,
    metrics: Metrics,
    service: str,
) -> Envelope[RetrievalCompleted] | None:
    """The ``expired`` completion of ``event`` when its deadline is reached at ``now`` (counted), else None."""
    request = event.payload
    if not is_expired(request.deadline, now):
        return None
    metrics.requests_expired.labels(service).inc()
    late_s = -(remaining_s(request.deadline, now) or 0.0)
    log.info("request_expired", project=event.project, late_ms=round(late_s * 1000, 1))
    completed = expired_completion(request, event.emitted_at, embedding_model=embedding_model, profile=profile)
    return event.caused(completed, producer=service, now=now)
