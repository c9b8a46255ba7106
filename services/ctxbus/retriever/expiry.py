"""The retriever's deadlines: a request whose deadline has passed, or would pass before it could be answered,
is answered at once with an ``expired`` completion (no embedding, no search, no ranking); under overload the
oldest request makes way for the fresher ones behind it (see ``ctxbus.core.deadlines.shed_cause``).

It wraps the retriever handler in the service's consumer loop only: the Python API and backtests call the
handler itself, and a request without a deadline goes straight through.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.handling import BACKLOG, Handler, Output
from ctxbus.adapters.kafka.prepare import BatchPreparer
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.core.deadlines import LoadShedder, expired_completion, remaining_s
from ctxbus.core.profiles import InvalidOverride, UnknownProfile
from ctxbus.observability import Metrics
from ctxbus.retriever.request_scope import profile_for

log = structlog.get_logger("ctxbus.retriever")

SERVICE = "retriever"


class RetrieverDeadlines:
    def __init__(
        self,
        inner: Handler,
        *,
        topic: str,
        embedding_model: str,
        metrics: Metrics,
        clock: Callable[[], datetime],
        shedder: LoadShedder | None = None,
    ) -> None:
        self._inner = inner
        self._topic = topic
        self._model = embedding_model
        self._metrics = metrics
        self._clock = clock
        self.shedder = shedder or LoadShedder()
        #: each prepared request's share of its batch's preparation (seconds), until it is handled
        self._prepared: dict[str, float] = {}

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> int:
        """The inner handler's preparation (the next embeddings) for the requests that will be served: none is
        spent on a request that will be answered as expired. Its time is shared among them in the work estimate.
        Returns how many of ``batch`` that covers."""
        self._prepared.clear()  # the requests prepared before are all handled
        if not isinstance(self._inner, BatchPreparer):
            return len(batch)
        now, clock = time.monotonic(), self._clock()
        served = [(i, item) for i, item in enumerate(batch) if self._shed_cause(*item, clock, now) is None]
        if not served:
            return len(batch)
        taken = await self._inner.prepare([item for _, item in served])
        if taken <= 0:
            return served[0][0] + 1
        share = (time.monotonic() - now) / taken
        self._prepared.update((str(event.event_id), share) for _, (event, _) in served[:taken])
        return len(batch) if taken >= len(served) else served[taken - 1][0] + 1

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        prepared = self._prepared.pop(str(event.event_id), 0.0)
        if isinstance(event.payload, RetrievalRequested) and event.payload.deadline is not None:
            expired = self._expired(event, event.payload)
            if expired is not None:
                return [Output(self._topic, expired)]
        started = time.monotonic()
        outputs = await self._inner(event)
        done = time.monotonic()
        self.shedder.served(done - started + prepared, now=done)
        return outputs

    def _shed_cause(self, event: AnyEnvelope, backlog: int, clock: datetime, now: float) -> str | None:
        """Why a request would be answered at once (as ``_expired`` decides it), or None."""
        request = event.payload
        if not isinstance(request, RetrievalRequested) or request.deadline is None:
            return None
        return self.shedder.cause(remaining_s(request.deadline, clock), backlog=backlog, now=now)

    def _expired(self, event: Envelope[RetrievalRequested], request: RetrievalRequested) -> AnyEnvelope | None:
        now = self._clock()
        left = remaining_s(request.deadline, now)
        cause = self.shedder.cause(left, backlog=BACKLOG.get(), now=time.monotonic())
        if cause is None:
            return None
        try:
            profile = profile_for(request).name
        except (UnknownProfile, InvalidOverride):
            return None  # poison: the handler dead-letters it
        self._metrics.requests_expired.labels(SERVICE, cause).inc()
        log.info(
            "request_expired",
            cause=cause,
            project=event.project,
            left_ms=round((left or 0.0) * 1000, 1),
            work_ms=round(self.shedder.estimate.seconds * 1000, 1),
            backlog=BACKLOG.get(),
        )
        completed = expired_completion(request, event.emitted_at, embedding_model=self._model, profile=profile)
        return event.caused(completed, producer=SERVICE, now=now)
