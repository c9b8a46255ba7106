"""Request deadlines (pure): when an asker stops waiting, whether a request is still worth any work, and
the answers a service gives instead of working on a request that has expired.

A request's ``deadline`` (``RetrievalRequested.deadline``, UTC) is the last moment an answer may leave the
pipeline and still reach its asker: the asker's own wait, less a margin for the answer's way back (the
injected event's trip over the broker to the waiting reply router). A request without one is served as
ever. A service that reads a request at or after its deadline answers it at once, with no retrieval and
no assembly: an empty answer whose ``empty_reason`` is ``expired``. So a backlog of stale requests drains
at the speed of reading, and the fresh requests behind it get the retrieval work.

Deadlines are compared with the service's clock: producers and services are assumed to keep their clocks
in sync (NTP); a service whose clock runs ahead expires requests early by as much.
"""

from __future__ import annotations

import statistics
from collections import deque
from datetime import UTC, datetime, timedelta

from ctxbus.contract.payloads import (
    MAX_RETRIEVAL_MS,
    ContextInjected,
    ContextSource,
    RetrievalCompleted,
    RetrievalRequested,
)

#: ``empty_reason`` of a request answered without work because its deadline had passed
EXPIRED = "expired"
#: how much earlier than the asker's own give-up a request's deadline falls: the injected event's way back
#: (injector -> broker -> reply router -> asker; tens of milliseconds on one machine, more on a loaded one)
RETURN_MARGIN_S = 0.1


def deadline_for(now: datetime, wait_s: float, *, margin_s: float = RETURN_MARGIN_S) -> datetime:
    """The deadline of a request whose asker waits ``wait_s`` seconds from ``now`` (UTC; never before ``now``)."""
    return (now + timedelta(seconds=max(0.0, wait_s - margin_s))).astimezone(UTC)


def remaining_s(deadline: datetime | None, now: datetime) -> float | None:
    """Seconds left until ``deadline`` (negative once passed); None without a deadline."""
    if deadline is None:
        return None
    return (deadline - now).total_seconds()


def is_expired(deadline: datetime | None, now: datetime) -> bool:
    """Whether an answer sent from ``now`` is too late: the deadline is reached or past."""
    return deadline is not None and deadline <= now


def with_deadline(request: RetrievalRequested, deadline: datetime | None) -> RetrievalRequested:
    """The same request with ``deadline`` (None: without one)."""
    return request.model_copy(update={"deadline": deadline})


def expired_completion(
    request: RetrievalRequested, request_emitted_at: datetime, *, embedding_model: str, profile: str
) -> RetrievalCompleted:
    """The retriever's answer to an expired request: no items, nothing searched, ``empty_reason=expired``."""
    return RetrievalCompleted(
        request=request,
        request_emitted_at=request_emitted_at,
        items=(),
        candidates_considered=0,
        retrieval_duration_ms=0.0,
        embedding_model=embedding_model,
        empty_reason=EXPIRED,
        profile=profile,
        task_type=request.task_type,
    )


def expired_injection(completed: RetrievalCompleted) -> ContextInjected:
    """The injector's answer when the request has expired (passed on from the retriever, or expired since):
    an empty context with ``empty_reason=expired``, nothing assembled."""
    request = completed.request
    return ContextInjected(
        context_source=ContextSource.NONE,
        pattern_count=0,
        context_size_bytes=0,
        agent_domain=request.domain,
        min_confidence_threshold=request.min_confidence,
        retrieval_duration_ms=min(round(completed.retrieval_duration_ms), MAX_RETRIEVAL_MS),
        agent_name=request.agent_name,
        agent_role=request.agent_role,
        trigger=request.trigger,
        context="",
        context_chars=0,
        token_estimate=0,
        injection_target=request.injection_target,
        empty_reason=EXPIRED,
        request_emitted_at=completed.request_emitted_at,
        task_id=request.task_id,
    )


# --- shedding: fresh requests before stale ones -------------------------------------------------------------

#: why a request was answered at once (the ``cause`` of ``ctxbus_requests_expired_total``)
PAST_DEADLINE = "past_deadline"
WOULD_MISS = "would_miss"
OVERLOAD = "overload"


def shed_cause(remaining: float | None, *, work_s: float, backlog: int) -> str | None:
    """Why a request with ``remaining`` seconds until its deadline is answered at once (``expired``) instead of
    worked on, or None to serve it. ``work_s`` is what serving one request takes now (0: not known yet),
    ``backlog`` how many requests wait behind it.

    - past its deadline: nothing sent now reaches the asker;
    - it would miss its deadline even if served now;
    - overload: it and the requests behind it cannot all be served before its deadline (theirs are later).
      Requests are served in order, so shedding the oldest lets the fresher ones behind be served in time:
      with equal budgets this serves as many requests as first-come order, the freshest ones, and never
      spends work on an answer that comes too late.
    """
    if remaining is None:
        return None
    if remaining <= 0:
        return PAST_DEADLINE
    if work_s > remaining:
        return WOULD_MISS
    if (backlog + 1) * work_s > remaining:
        return OVERLOAD
    return None


class WorkEstimate:
    """What serving one request takes now: the median of the last ``window`` measured durations (robust to the
    odd very long prompt; follows a machine that slows down within a few requests)."""

    def __init__(self, window: int = 9) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self._recent: deque[float] = deque(maxlen=window)

    def observe(self, seconds: float) -> None:
        self._recent.append(max(0.0, seconds))

    @property
    def seconds(self) -> float:
        """0.0 until something was measured."""
        return statistics.median(self._recent) if self._recent else 0.0


#: the longest the predictions may keep a service from working: after this long without serving a request,
#: the next one that still has time left is served (and measured), so a stale estimate cannot shed forever
PROBE_AFTER_S = 1.0


class LoadShedder:
    """``shed_cause`` with the service's own measure of its work, and a probe: the predictions (would miss,
    overload) apply only while requests are being served; after ``probe_after_s`` without one, the next request
    with time left is served, whatever the estimate says. Times are ``time.monotonic()`` seconds."""

    def __init__(self, estimate: WorkEstimate | None = None, *, probe_after_s: float = PROBE_AFTER_S) -> None:
        self.estimate = estimate or WorkEstimate()
        self._probe_after_s = probe_after_s
        self._last_served: float | None = None

    def cause(self, remaining: float | None, *, backlog: int, now: float) -> str | None:
        """Why the request is answered at once, or None to serve it."""
        cause = shed_cause(remaining, work_s=self.estimate.seconds, backlog=backlog)
        if cause in (WOULD_MISS, OVERLOAD) and self._probing(now):
            return None
        return cause

    def served(self, seconds: float, *, now: float) -> None:
        """A request was served (it took ``seconds``), ending at ``now``."""
        self.estimate.observe(seconds)
        self._last_served = now

    def _probing(self, now: float) -> bool:
        return self._last_served is None or now - self._last_served >= self._probe_after_s
