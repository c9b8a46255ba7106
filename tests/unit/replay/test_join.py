"""Joining facts into chains by correlation id, and attaching outcomes and dead letters."""

from __future__ import annotations

from datetime import timedelta

from ctxbus.contract.payloads import Outcome, OutcomeScope
from ctxbus.replay.decode import Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.facts import DeadLetterFact, Fact
from ctxbus.replay.join import (
    STATUS_DEAD_LETTERED,
    STATUS_EMPTY,
    STATUS_INJECTED,
    STATUS_NOT_COMPLETED,
    STATUS_NOT_INJECTED,
    Joiner,
    JoinResult,
)

from .events import T0, TOPICS, chain, outcome, raw

DECODER = Decoder(topic_types(TOPICS), TOPICS.dead_letter)


def facts(*events: object) -> list[Fact]:
    found, stats = DECODER.decode([raw(e) for e in events])  # type: ignore[arg-type]
    assert not stats.skipped
    return found


def join(*events: object, extra: list[Fact] | None = None) -> JoinResult:
    joiner = Joiner()
    joiner.add(reversed(facts(*events)))  # order does not matter
    joiner.add(extra or [])
    return joiner.finish()


def test_the_three_stages_join_on_the_correlation_id_with_stage_latencies() -> None:
    req, done, inj = chain(stage_ms=(30, 5))
    (c,) = join(req, done, inj).chains
    assert c.correlation_id == str(req.correlation_id)
    assert c.status == STATUS_INJECTED
    assert c.request_to_completed_ms == 30.0 and c.completed_to_injected_ms == 5.0 and c.end_to_end_ms == 35.0
    assert (c.project, c.session_id, c.agent_name, c.profile, c.task_type, c.fingerprint) == (
        "acme/web",
        "s1",
        "claude-code",
        "implementer",
        "bugfix",
        "fp1",
    )


def test_stages_outside_the_window_still_give_the_latencies_their_events_carry() -> None:
    _, done, inj = chain(stage_ms=(40, 10))
    (c,) = join(done, inj).chains  # the request was before --since
    assert c.requested is None and c.request_to_completed_ms == 40.0 and c.end_to_end_ms == 50.0
    (only,) = join(inj).chains
    assert only.end_to_end_ms == 50.0 and only.request_to_completed_ms is None and only.profile is None


def test_statuses() -> None:
    a = chain(session="a")
    b = chain(session="b", injected=(), retrieved=(), empty_reason="nothing_relevant_enough")
    c = chain(session="c")
    d = chain(session="d")
    result = join(*a, *b, c[0], c[1], d[0])
    by_session = {ch.session_id: ch for ch in result.chains}
    assert by_session["a"].status == STATUS_INJECTED
    assert by_session["b"].status == STATUS_EMPTY and by_session["b"].empty_reason == "nothing_relevant_enough"
    assert by_session["c"].status == STATUS_NOT_INJECTED
    assert by_session["d"].status == STATUS_NOT_COMPLETED


def test_a_stage_read_twice_is_kept_once_and_counted() -> None:
    req, done, inj = chain()
    result = join(req, done, inj, req, inj)
    assert len(result.chains) == 1 and result.duplicates == 2


def test_a_session_outcome_reaches_the_sessions_earlier_requests_only() -> None:
    first = chain(session="s", at=T0)
    late = chain(session="s", at=T0 + timedelta(minutes=10))
    other = chain(session="other", at=T0)
    end = outcome(Outcome.SUCCESSFUL, session="s", at=T0 + timedelta(minutes=5))
    result = join(*first, *late, *other, end)
    by_corr = {c.correlation_id: c for c in result.chains}
    assert by_corr[str(first[0].correlation_id)].outcome_value == "successful"
    assert by_corr[str(first[0].correlation_id)].outcome_via == "session"
    assert by_corr[str(late[0].correlation_id)].outcome is None  # requested after the outcome
    assert by_corr[str(other[0].correlation_id)].outcome is None
    assert result.outcome_links["session"] == 1 and result.unmatched_outcomes == 0


def test_the_same_session_name_in_another_project_is_another_session() -> None:
    mine = chain(session="s", project="acme/web")
    end = outcome(Outcome.FAILED, session="s", project="other/app", at=T0 + timedelta(minutes=1))
    result = join(*mine, end)
    assert result.chains[0].outcome is None and result.unmatched_outcomes == 1


def test_a_known_outcome_wins_over_unknown_and_the_first_after_the_request_over_later_ones() -> None:
    turn = chain(session="s", at=T0)
    stop_unknown = outcome(Outcome.UNKNOWN, session="s", at=T0 + timedelta(minutes=1))
    first_known = outcome(Outcome.PARTIAL, session="s", at=T0 + timedelta(minutes=2))
    later_known = outcome(Outcome.FAILED, session="s", at=T0 + timedelta(minutes=3))
    (c,) = join(*turn, later_known, stop_unknown, first_known).chains
    assert c.outcome_value == "partial"
    (only_unknown,) = join(*turn, stop_unknown).chains
    assert only_unknown.outcome_value == "unknown"


def test_a_task_outcome_reaches_the_requests_of_that_task() -> None:
    task_turn = chain(session="s1", task_id="T-9")
    other_turn = chain(session="s1", task_id="T-1")
    end = outcome(
        Outcome.FAILED, session="orchestrator", scope=OutcomeScope.TASK, task_id="T-9", at=T0 + timedelta(seconds=5)
    )
    result = join(*task_turn, *other_turn, end)
    by_corr = {c.correlation_id: c for c in result.chains}
    assert by_corr[str(task_turn[0].correlation_id)].outcome_value == "failed"
    assert by_corr[str(task_turn[0].correlation_id)].outcome_via == "task"
    assert by_corr[str(other_turn[0].correlation_id)].outcome is None


def test_a_task_outcome_reaches_an_injection_whose_request_is_outside_the_window() -> None:
    _, _, inj = chain(session="s1", task_id="T-9")
    end = outcome(
        Outcome.SUCCESSFUL, session="orchestrator", scope=OutcomeScope.TASK, task_id="T-9", at=T0 + timedelta(seconds=5)
    )
    (c,) = join(inj, end).chains
    assert c.task_id == "T-9" and c.outcome_value == "successful" and c.outcome_via == "task"


def test_an_outcome_naming_a_requests_correlation_id_reaches_that_request_first() -> None:
    one = chain(session="s", at=T0)
    two = chain(session="s", at=T0 + timedelta(seconds=1))
    direct = outcome(Outcome.FAILED, session="s", at=T0 + timedelta(minutes=1), correlation=one[0])
    session = outcome(Outcome.SUCCESSFUL, session="s", at=T0 + timedelta(seconds=30))
    result = join(*one, *two, direct, session)
    by_corr = {c.correlation_id: c for c in result.chains}
    assert by_corr[str(one[0].correlation_id)].outcome_value == "failed"
    assert by_corr[str(one[0].correlation_id)].outcome_via == "correlation"
    assert by_corr[str(two[0].correlation_id)].outcome_value == "successful"


def test_a_dead_lettered_request_marks_its_chain() -> None:
    req = chain()[0]
    dead = DeadLetterFact(
        partition=0,
        offset=5,
        timestamp_ms=1,
        original_topic=TOPICS.retrieval_requested,
        original_partition=0,
        original_offset=3,
        consumer_group="t.retriever",
        error_class="PoisonEvent",
        reason="rejected",
        error_message="rejected: x",
        attempts=1,
        event_type="context.retrieval.requested",
        correlation_id=str(req.correlation_id),
    )
    result = join(req, extra=[dead])
    (c,) = result.chains
    assert c.status == STATUS_DEAD_LETTERED and c.dead_letter == dead
    assert result.dead_letters == [dead]


def test_chains_come_out_in_request_order() -> None:
    later = chain(session="x", at=T0 + timedelta(hours=1))
    earlier = chain(session="y", at=T0)
    result = join(*later, *earlier)
    assert [c.session_id for c in result.chains] == ["y", "x"]


def test_a_chain_is_grouped_by_the_fingerprint_of_the_context_as_injected() -> None:
    """Issue 25: the injected event's fingerprint (v4) describes what was injected; the retrieval's is the
    candidates'. An older injected event without one leaves the retrieval's."""
    req, done, inj = chain()
    injected = inj.model_copy(update={"payload": inj.payload.model_copy(update={"fingerprint": "as-injected"})})
    (c,) = join(req, done, injected).chains
    assert c.fingerprint == "as-injected"
    (older,) = join(req, done, inj).chains
    assert older.fingerprint == "fp1"
