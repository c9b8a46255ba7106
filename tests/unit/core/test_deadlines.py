"""Request deadlines: when an asker stops waiting, when a request has expired, and the expired answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from ctxbus.contract.payloads import ContextSource, RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.core.deadlines import (
    EXPIRED,
    RETURN_MARGIN_S,
    deadline_for,
    expired_completion,
    expired_injection,
    is_expired,
    remaining_s,
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
