"""Request deadlines: when an asker stops waiting, when a request has expired, and the expired answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from ctxbus.contract.payloads import ContextSource, RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.core.deadlines import (
    EXPIRED,
    OVERLOAD,
    PAST_DEADLINE,
    RETURN_MARGIN_S,
    WOULD_MISS,
    LoadShedder,
    WorkEstimate,
    deadline_for,
    expired_completion,
    expired_injection,
    is_expired,
    remaining_s,
    shed_cause,
    with_deadline,
)

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def request(**kw: object) -> RetrievalRequested:
    return RetrievalRequested(agent_name="a", prompt="fix login", trigger=Trigger.USER_PROMPT, **kw)  # type: ignore[arg-type]


def test_the_deadline_keeps_a_margin_for_the_answers_way_back() -> None:
    assert deadline_for(NOW, 2.0) == NOW + timedelta(seconds=2.0 - RETURN_MARGIN_S)
    assert deadline_for(NOW, 2.0, margin_s=0.5) == NOW + timedelta(seconds=1.5)
    # a wait shorter than the margin: the request is due at once, never in the past
    assert deadline_for(NOW, 0.05) == NOW
    assert deadline_for(NOW, 0.0) == NOW


def test_a_deadline_is_utc_whatever_the_clock_zone() -> None:
    local = datetime(2026, 6, 1, 14, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    assert deadline_for(local, 1.1, margin_s=0.1).tzinfo == UTC


def test_expiry() -> None:
    assert not is_expired(None, NOW)  # no deadline: served as ever
    assert not is_expired(NOW + timedelta(milliseconds=1), NOW)
    assert is_expired(NOW, NOW)  # the asker stops waiting now: nothing sent from here reaches it
    assert is_expired(NOW - timedelta(hours=1), NOW)
    assert remaining_s(None, NOW) is None
    assert remaining_s(NOW + timedelta(seconds=1.5), NOW) == pytest.approx(1.5)
    assert remaining_s(NOW - timedelta(seconds=2), NOW) == pytest.approx(-2.0)


def test_with_deadline_sets_only_the_deadline() -> None:
    before = request(domain="auth", max_items=3)
    after = with_deadline(before, NOW)
    assert after.deadline == NOW
    assert after.model_dump(exclude={"deadline"}) == before.model_dump(exclude={"deadline"})
    assert before.deadline is None
    assert with_deadline(after, None).deadline is None


def test_an_expired_completion_carries_the_request_and_nothing_else() -> None:
    req = request(deadline=NOW, task_id="t-1")
    done = expired_completion(req, NOW - timedelta(seconds=3), embedding_model="m", profile="planner")
    assert done.empty_reason == EXPIRED
    assert done.items == () and done.candidates_considered == 0 and done.retrieval_duration_ms == 0.0
    assert done.request == req and done.request_emitted_at == NOW - timedelta(seconds=3)
    assert done.profile == "planner" and done.embedding_model == "m" and done.fingerprint is None
    RetrievalCompleted.model_validate(done.model_dump())  # within the contract's bounds


def test_an_expired_injection_is_empty_and_says_why() -> None:
    req = request(deadline=NOW, domain="auth", task_id="t-1", prime=True)
    item = RankedItem(id="i", project="p", kind="pattern", content="c", confidence=0.9, score=0.8)
    done = RetrievalCompleted(
        request=req,
        request_emitted_at=NOW - timedelta(seconds=2),
        items=(item,),
        retrieval_duration_ms=12_345.6,
        embedding_model="m",
    )
    injected = expired_injection(done)
    assert injected.empty_reason == EXPIRED
    assert injected.context == "" and injected.item_ids == () and injected.pattern_count == 0
    assert injected.context_source is ContextSource.NONE and injected.token_estimate == 0
    assert injected.trigger is Trigger.USER_PROMPT and injected.agent_domain == "auth" and injected.task_id == "t-1"
    assert injected.request_emitted_at == done.request_emitted_at
    assert injected.retrieval_duration_ms == 10_000  # the contract's bound (seed 002)
    assert injected.prime is None


# --- shedding: which requests are answered at once instead of worked on ------------------------


def test_a_request_without_a_deadline_is_always_served() -> None:
    assert shed_cause(None, work_s=10.0, backlog=10_000) is None


def test_a_request_past_its_deadline_is_expired() -> None:
    assert shed_cause(0.0, work_s=0.0, backlog=0) == PAST_DEADLINE
    assert shed_cause(-3.0, work_s=0.0, backlog=0) == PAST_DEADLINE


def test_a_request_that_cannot_be_answered_in_the_time_it_has_left_is_not_worked_on() -> None:
    assert shed_cause(0.010, work_s=0.018, backlog=0) == WOULD_MISS
    assert shed_cause(0.020, work_s=0.018, backlog=0) is None


def test_under_overload_the_oldest_request_makes_way_for_the_fresher_ones_behind_it() -> None:
    # 1.2 s left, 18 ms a retrieval: this one and 65 behind it can all be served in that time, and 66 cannot
    assert shed_cause(1.2, work_s=0.018, backlog=65) is None
    assert shed_cause(1.2, work_s=0.018, backlog=66) == OVERLOAD
    # until the retriever has measured its work, only the deadline itself counts
    assert shed_cause(1.2, work_s=0.0, backlog=10_000) is None


def test_a_burst_keeps_the_newest_requests_that_can_all_be_served() -> None:
    """100 requests at once with 1.2 s each and 18 ms of work: shedding the oldest as long as the rest cannot
    be served serves as many as plain first-come order would (66), and each of them in time."""
    budget, work, n = 1.2, 0.018, 100
    clock, served = 0.0, []
    for i in range(n):
        cause = shed_cause(budget - clock, work_s=work, backlog=n - i - 1)
        if cause is None:
            clock += work
            served.append(i)
    assert len(served) == 66 and served == list(range(34, 100))
    assert clock <= budget


def test_the_work_estimate_is_the_median_of_recent_work() -> None:
    estimate = WorkEstimate(window=5)
    assert estimate.seconds == 0.0  # nothing measured yet
    for s in (0.02, 0.018, 3.0, 0.019, 0.021):  # one very long prompt does not move it
        estimate.observe(s)
    assert estimate.seconds == pytest.approx(0.020)
    for s in (0.2,) * 5:  # the window forgets
        estimate.observe(s)
    assert estimate.seconds == pytest.approx(0.2)
    with pytest.raises(ValueError):
        WorkEstimate(window=0)


def test_the_shedder_probes_so_a_stale_estimate_cannot_shed_forever() -> None:
    shedder = LoadShedder(WorkEstimate(window=3), probe_after_s=1.0)
    assert shedder.cause(0.5, backlog=100, now=0.0) is None  # nothing measured, nothing predicted
    shedder.served(1.5, now=10.0)  # one very slow request (the machine stalled)
    assert shedder.cause(1.0, backlog=0, now=10.2) == WOULD_MISS
    assert shedder.cause(5.0, backlog=10, now=10.4) == OVERLOAD
    assert shedder.cause(-0.1, backlog=0, now=10.5) == PAST_DEADLINE
    # a second without serving: the next request with time left is served, and measured
    assert shedder.cause(1.0, backlog=0, now=11.0) is None
    assert shedder.cause(-0.1, backlog=0, now=11.0) == PAST_DEADLINE  # never a late one
    shedder.served(0.02, now=11.02)
    shedder.served(0.02, now=11.04)
    assert shedder.estimate.seconds == pytest.approx(0.02)
    assert shedder.cause(1.0, backlog=10, now=11.05) is None
