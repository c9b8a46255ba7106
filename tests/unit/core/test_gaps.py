"""Gap detection on agent states: each detector at and around its thresholds, the confidence
combination, the query, the injection target, the policy's validation and bad states."""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ctxbus.contract.payloads import MAX_PROMPT_CHARS, TaskType
from ctxbus.core.agent_state import DEFAULT_TARGET, HANDOFF_TARGET, AgentState, StateError, parse_state
from ctxbus.core.gaps import (
    GapPolicy,
    GapReason,
    Indicator,
    Similarity,
    assess_gap,
    build_query,
    combine_confidence,
    detect_circular_logic,
    detect_clarification,
    detect_explicit_flag,
    detect_gap,
    detect_gate_failure,
    detect_long_cycle,
    injection_target,
    needing_agent,
)

POLICY = GapPolicy()
NOW = datetime(2024, 6, 3, 9, 30, tzinfo=UTC)
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "agent_state_gap.json"


def state(**sections: Any) -> AgentState:
    return parse_state(sections)


def agent(content: str, **kw: Any) -> dict[str, Any]:
    return {"role": "agent", "agent": "dev", "content": content, **kw}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def constant(value: float) -> Similarity:
    return lambda a, b: value


def by_topic(a: str, b: str) -> float:
    """A deterministic stand-in for embedding cosine: texts about the same topic (the word before ':') are close."""
    return 0.9 if a.partition(":")[0] == b.partition(":")[0] else 0.1


def reasons(indicators: list[Indicator]) -> list[str]:
    return [i.signal for i in indicators]


# --- the state document ------------------------------------------------------------------------


def test_an_empty_state_is_valid_and_has_no_gap() -> None:
    assessment = assess_gap(state(), POLICY, by_topic, now=NOW)
    assert assessment.gap is None and assessment.indicators == () and assessment.confidence == 0.0
    assert assessment.why == "no gap indicators in the state"


def test_unknown_keys_are_kept_and_shapes_are_tolerated() -> None:
    s = state(
        notes=[{"summary": "x"}],
        current_task="Fix reset",
        health_status={"agent_cycle_times": {"dev": 5}, "baseline_cycle_time": 2},
        messages=[
            "plain text message",
            {"role": "assistant", "content": [{"type": "text", "text": "block one"}, {"type": "image"}]},
        ],
        gate_results={"lint": {"passed": False, "missing_context": ["style guide"]}},
        cycle_analysis=None,
    )
    assert s.model_extra == {"notes": [{"summary": "x"}]}
    assert s.task == "Fix reset"
    assert s.health_metrics is not None and s.health_metrics.average_cycle_time == 2
    assert [m.content for m in s.messages] == ["plain text message", "block one"]
    assert s.gate_results[0].gate == "lint"
    assert state(messages=None, gate_results=None).messages == []


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([1, 2], "must be a JSON object, not list"),
        ("text", "must be a JSON object, not str"),
        ({"messages": [{"content": "a"}, {"clarification_needed": "perhaps"}]}, "messages[1].clarification_needed"),
        ({"messages": {"content": "a"}}, "messages: Input should be a valid list"),
        ({"health_metrics": {"agent_cycle_times": {"dev": -3}}}, "health_metrics.agent_cycle_times.dev"),
        ({"gate_results": [{"gate": "x", "passed": "no idea"}]}, "gate_results[0].passed"),
        ({"task_type": "party"}, "task_type"),
        ({"injection_target": "messages"}, "'messages' is a state section"),
        ({"injection_target": ""}, "injection_target"),
    ],
)
def test_a_bad_state_names_what_is_wrong(raw: object, named: str) -> None:
    with pytest.raises(StateError) as err:
        parse_state(raw)
    assert named in str(err.value)


def test_many_errors_are_summarised() -> None:
    raw = {"messages": [{"clarification_needed": "x"}] * 5}
    with pytest.raises(StateError, match=r"\(and 2 more\)"):
        parse_state(raw)


def test_the_sample_state_has_a_clarification_gap() -> None:
    gap = detect_gap(parse_state(json.loads(SAMPLE.read_text())), POLICY, by_topic, now=NOW)
    assert gap is not None and gap.reason is GapReason.CLARIFICATION_REQUESTED
    assert gap.reasons == (GapReason.CLARIFICATION_REQUESTED, GapReason.LONG_CYCLE_TIME)
    assert gap.target == DEFAULT_TARGET and gap.agent == "dev"
    assert gap.query.text.startswith("Should a password reset revoke the existing refresh tokens")
    assert gap.query.domain == "auth" and gap.query.task_type is TaskType.BUGFIX
    assert gap.query.mentioned_files == ("src/auth/reset.py", "src/auth/session_cache.py")
    json.dumps(gap.to_dict())  # serialisable as it stands


# --- clarification -----------------------------------------------------------------------------


def test_a_flagged_message_is_a_clarification_request() -> None:
    s = state(messages=[agent("which token store?", clarification_needed=True)])
    (ind,) = detect_clarification(s, POLICY)
    assert (ind.reason, ind.signal, ind.weight) == (GapReason.CLARIFICATION_REQUESTED, "clarification_flag", 0.9)
    assert ind.need == "which token store?"


def test_only_recent_messages_count_for_the_flag() -> None:
    policy = GapPolicy(recent_messages=3)
    inside = state(messages=[agent("asked", clarification_needed=True), agent("a."), agent("b.")])
    outside = state(messages=[agent("asked", clarification_needed=True), agent("a."), agent("b."), agent("c.")])
    assert reasons(detect_clarification(inside, policy)) == ["clarification_flag"]
    assert detect_clarification(outside, policy) == []


def test_a_question_alone_corroborates_but_is_no_gap() -> None:
    s = state(messages=[agent("Done with the endpoint. Why did the old test pass at all?")])
    assessment = assess_gap(s, POLICY, by_topic, now=NOW)
    assert reasons(list(assessment.indicators)) == ["agent_question"]
    assert assessment.gap is None and assessment.why.startswith("confidence 0.40 below 0.5")
    assert detect_clarification(state(messages=[user("Can you fix it?")]), POLICY) == []
    assert detect_clarification(state(messages=[agent("Is it? No. It is done.")]), POLICY) == []


def test_a_question_and_a_long_cycle_together_are_a_gap() -> None:
    s = state(
        current_agent="dev",
        messages=[agent("Which cache should hold sessions?")],
        health_metrics={"agent_cycle_times": {"dev": 300}, "baseline_cycle_times": {"dev": 100}},
    )
    gap = detect_gap(s, POLICY, now=NOW)
    assert gap is not None and gap.reason is GapReason.LONG_CYCLE_TIME
    assert gap.confidence == pytest.approx(1 - (1 - 0.4) * (1 - 0.55))


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("The expected token lifetime is unclear from the ticket.", "unclear"),
        ("I need more info about the session store before changing it.", "need more info"),
        ("Not sure what the TTL of a reset link should be.", "not sure what"),
        ("I don\u2019t know which cache the sessions live in.", "don't know which"),
        ("Could you clarify whether other devices stay logged in", "could you clarify"),
        ("The ticket is ambiguous about refresh tokens, so I stopped.", "ambiguous"),
    ],
)
def test_clarification_phrasing_is_a_gap(text: str, phrase: str) -> None:
    gap = detect_gap(state(current_agent="dev", messages=[user("Fix the reset flow."), agent(text)]), POLICY, now=NOW)
    assert gap is not None and gap.reason is GapReason.CLARIFICATION_REQUESTED
    (found,) = gap.indicators
    assert found.signal == "clarification_phrase" and f'"{phrase}"' in found.evidence and found.need == text
    assert found.weight == POLICY.clarification_phrase_weight >= POLICY.min_confidence


@pytest.mark.parametrize(
    "text",
    [
        "Should I keep other devices logged in after a reset?",
        "The fix is ready. Do you want refresh tokens revoked on reset? I can do either.",
        "@user which region is production?",
        "Orchestrator, is STORY-139 merged yet?",
    ],
)
def test_a_question_addressed_to_the_user_or_orchestrator_is_a_gap(text: str) -> None:
    gap = detect_gap(state(current_agent="dev", messages=[agent(text)]), POLICY, now=NOW)
    assert gap is not None and [i.signal for i in gap.indicators] == ["addressed_question"]
    assert gap.indicators[0].weight == POLICY.addressed_question_weight >= POLICY.min_confidence
    assert "?" in gap.indicators[0].evidence


@pytest.mark.parametrize(
    "text",
    [
        "It is clear now: revoke the tokens.",
        "I know which cache to use.",
        "I'll clarify the docs after the fix.",
        "Which cache should hold sessions? Redis, per ADR-007.",
        "Sure, done.",
        "",
    ],
)
def test_ordinary_messages_ask_for_nothing(text: str) -> None:
    assert detect_clarification(state(messages=[agent(text)]), POLICY) == []


def test_an_answered_request_is_no_gap_and_unanswered_older_ones_count() -> None:
    answered = state(messages=[agent("Not sure what TTL to use. Should I pick one?"), user("15 minutes.")])
    assert detect_clarification(answered, POLICY) == []
    pending = state(messages=[user("Go."), agent("The TTL is unclear."), agent("Reading the cache code meanwhile.")])
    (found,) = detect_clarification(pending, POLICY)
    assert found.signal == "clarification_phrase" and found.evidence.startswith("message 1 ")
    flagged = state(messages=[agent("Unclear: which store?", clarification_needed=True)])
    assert reasons(detect_clarification(flagged, POLICY)) == ["clarification_flag"]  # not counted twice


def test_phrases_are_found_in_long_messages() -> None:
    long = "the cache code reads fine " * 20_000 + "and the ttl is settled"  # ~520,000 characters
    assert reasons(detect_clarification(state(messages=[agent(long)]), POLICY)) == []
    long = "the cache code reads fine " * 20_000 + "but I am not sure what the ttl is"
    assert reasons(detect_clarification(state(messages=[agent(long)]), POLICY)) == ["clarification_phrase"]


# --- identity ----------------------------------------------------------------------------------


def test_a_gap_carries_a_stable_id_and_when_it_was_detected() -> None:
    s = state(current_agent="dev", agent_output={"missing_context": ["session TTL"]})
    first, again = detect_gap(s, POLICY, now=NOW), detect_gap(s, POLICY, now=NOW)
    assert first is not None and again is not None
    assert first.gap_id == again.gap_id == str(uuid.UUID(first.gap_id)) and first.detected_at == NOW
    later = detect_gap(s, POLICY, now=NOW + timedelta(seconds=1))
    other = detect_gap(state(current_agent="qa", agent_output={"missing_context": ["session TTL"]}), POLICY, now=NOW)
    assert later is not None and other is not None and len({first.gap_id, later.gap_id, other.gap_id}) == 3
    assert first.to_dict()["gap_id"] == first.gap_id and first.to_dict()["detected_at"] == "2024-06-03T09:30:00+00:00"
    given = detect_gap(s, POLICY, now=NOW, gap_id="gap-7")
    assert given is not None and given.gap_id == "gap-7"
    with pytest.raises(ValueError, match="timezone-aware"):
        detect_gap(s, POLICY, now=datetime(2024, 6, 3))


# --- circular logic ----------------------------------------------------------------------------


def test_the_cycle_analysis_flag_is_circular_logic() -> None:
    s = state(cycle_analysis={"circular_detected": True, "topic": "session revocation"})
    (ind,) = detect_circular_logic(s, POLICY, None)
    assert (
        ind.signal == "cycle_analysis" and ind.need == "session revocation" and "on session revocation" in ind.evidence
    )
    assert detect_circular_logic(state(cycle_analysis={"circular_detected": False}), POLICY, None) == []


def test_semantic_repetition_at_and_around_the_threshold() -> None:
    s = state(messages=[agent("one"), agent("two"), agent("three")])  # 2 later messages, each compared back
    at = detect_circular_logic(s, POLICY, constant(POLICY.circular_similarity))
    below = detect_circular_logic(s, POLICY, constant(math.nextafter(POLICY.circular_similarity, 0)))
    assert reasons(at) == ["semantic_repetition"] and at[0].weight == POLICY.circular_semantic_weight
    assert below == []


def test_repetitions_must_reach_the_minimum() -> None:
    looping = state(messages=[agent("tokens: revoke"), agent("cache: clear"), agent("tokens: keep")])
    assert detect_circular_logic(looping, POLICY, by_topic) == []  # one repeat, two needed
    looping = state(messages=[*looping.model_dump()["messages"], agent("tokens: revoke again")])
    (ind,) = detect_circular_logic(looping, POLICY, by_topic)
    assert ind.need == "tokens: revoke again" and "2 of the last 4" in ind.evidence


def test_only_the_agents_recent_messages_are_compared() -> None:
    users = state(messages=[user("tokens: a"), user("tokens: b"), user("tokens: c"), agent("cache: x")])
    assert detect_circular_logic(users, POLICY, by_topic) == []
    old = [agent("tokens: a"), agent("tokens: b"), agent("tokens: c")]
    fresh = [agent(f"step{i}: done") for i in range(POLICY.circular_window)]
    assert detect_circular_logic(state(messages=old + fresh), POLICY, by_topic) == []
    assert reasons(detect_circular_logic(state(messages=fresh[2:] + old), POLICY, by_topic)) == ["semantic_repetition"]


def test_without_similarity_only_the_flag_is_read() -> None:
    s = state(messages=[agent("same"), agent("same"), agent("same")])
    assert detect_circular_logic(s, POLICY, None) == []
    assert reasons(detect_circular_logic(s, POLICY, constant(1.0))) == ["semantic_repetition"]


# --- long cycle time ---------------------------------------------------------------------------


def cycle(current: float, baseline: float | None = None, average: float | None = None) -> AgentState:
    health: dict[str, Any] = {"agent_cycle_times": {"dev": current, "sm": 1000.0}}
    if baseline is not None:
        health["baseline_cycle_times"] = {"dev": baseline}
    if average is not None:
        health["average_cycle_time"] = average
    return state(current_agent="dev", health_metrics=health)


def test_a_cycle_over_twice_the_baseline_is_long_and_exactly_twice_is_not() -> None:
    assert detect_long_cycle(cycle(200.0, 100.0), POLICY) == []
    (ind,) = detect_long_cycle(cycle(math.nextafter(200.0, 300.0), 100.0), POLICY)
    assert ind.reason is GapReason.LONG_CYCLE_TIME and ind.weight == POLICY.long_cycle_weight
    assert "2.00x its baseline 100s" in ind.evidence
    assert detect_gap(cycle(201.0, 100.0), POLICY, now=NOW) is not None  # a long cycle alone is a gap


def test_the_agents_own_baseline_wins_over_the_average() -> None:
    assert detect_long_cycle(cycle(300.0, baseline=200.0, average=10.0), POLICY) == []
    assert reasons(detect_long_cycle(cycle(300.0, average=100.0), POLICY)) == ["cycle_time"]


@pytest.mark.parametrize(
    "s",
    [
        cycle(500.0),  # no baseline at all
        cycle(500.0, baseline=0.0),  # a zero baseline says nothing
        state(health_metrics={"agent_cycle_times": {"dev": 500}, "average_cycle_time": 1}),  # no current agent
        state(current_agent="qa", health_metrics={"agent_cycle_times": {"dev": 500}, "average_cycle_time": 1}),
    ],
)
def test_no_judgement_without_a_baseline_or_the_agents_time(s: AgentState) -> None:
    assert detect_long_cycle(s, POLICY) == []


def test_the_ratio_is_a_policy() -> None:
    assert reasons(detect_long_cycle(cycle(160.0, 100.0), GapPolicy(long_cycle_ratio=1.5))) == ["cycle_time"]


# --- gates and explicit flags ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gate", "found"),
    [
        ({"gate": "dod", "passed": False, "missing_context": ["session TTL"]}, True),
        ({"gate": "dod", "passed": False, "missing_context": True, "reason": "no ADR"}, True),
        ({"gate": "dod", "passed": False, "reason": "missing_context"}, True),
        ({"gate": "dod", "passed": False, "reason": "coverage 62% below 80%"}, False),
        ({"gate": "dod", "passed": False, "missing_context": ["  "]}, False),
        ({"gate": "dod", "passed": True, "missing_context": ["session TTL"]}, False),
    ],
)
def test_a_failed_gate_with_missing_context(gate: dict[str, Any], found: bool) -> None:
    indicators = detect_gate_failure(state(gate_results=[gate]), POLICY)
    assert bool(indicators) is found
    if found:
        assert indicators[0].weight == POLICY.gate_failure_weight and indicators[0].need.startswith("dod: ")


def test_the_gate_need_names_what_is_missing() -> None:
    gate = {"gate_name": "dod", "passed": False, "missing_context": ["session TTL", "ADR-007"]}
    (ind,) = detect_gate_failure(state(gate_results=[gate]), POLICY)
    assert ind.need == "dod: session TTL; ADR-007" and "gate dod failed" in ind.evidence


@pytest.mark.parametrize(
    ("flag", "need"),
    [(True, ""), ("the token store", "the token store"), (["a", " ", "b"], "a; b"), (False, None), ([], None)],
)
def test_the_explicit_missing_context_flag(flag: object, need: str | None) -> None:
    indicators = detect_explicit_flag(state(agent_output={"agent": "dev", "missing_context": flag}), POLICY)
    if need is None:
        assert indicators == []
    else:
        (ind,) = indicators
        assert ind.reason is GapReason.EXPLICIT_FLAG and ind.need == need and ind.weight == 0.95


# --- confidence --------------------------------------------------------------------------------


def ind(reason: GapReason, weight: float) -> Indicator:
    return Indicator(reason, "s", weight, "e")


def test_confidence_is_a_noisy_or_over_reasons() -> None:
    assert combine_confidence([]) == 0.0
    assert combine_confidence([ind(GapReason.GATE_FAILURE, 0.5)]) == 0.5
    both = [ind(GapReason.GATE_FAILURE, 0.5), ind(GapReason.LONG_CYCLE_TIME, 0.5)]
    assert combine_confidence(both) == pytest.approx(0.75)
    same = [ind(GapReason.GATE_FAILURE, 0.5), ind(GapReason.GATE_FAILURE, 0.6)]
    assert combine_confidence(same) == pytest.approx(0.6)  # one reason counts once, at its strongest


def test_a_gap_needs_the_minimum_confidence_exactly() -> None:
    s = cycle(300.0, 100.0)
    assert detect_gap(s, GapPolicy(min_confidence=POLICY.long_cycle_weight), now=NOW) is not None
    assessment = assess_gap(s, GapPolicy(min_confidence=math.nextafter(POLICY.long_cycle_weight, 1.0)), now=NOW)
    assert assessment.gap is None and "cycle_time" in assessment.why


def test_the_strongest_indicator_names_the_gap() -> None:
    s = state(
        current_agent="dev",
        agent_output={"missing_context": ["ADR-007"]},
        gate_results=[{"gate": "dod", "passed": False, "missing_context": "TTL"}],
        messages=[agent("which store?", clarification_needed=True)],
    )
    gap = detect_gap(s, POLICY, now=NOW)
    assert gap is not None and gap.reason is GapReason.EXPLICIT_FLAG
    assert set(gap.reasons) == {GapReason.EXPLICIT_FLAG, GapReason.GATE_FAILURE, GapReason.CLARIFICATION_REQUESTED}
    assert gap.query.text.splitlines()[:3] == ["ADR-007", "which store?", "dod: TTL"]


# --- query -------------------------------------------------------------------------------------


def test_the_query_puts_the_need_first_then_the_state() -> None:
    s = state(
        task="Fix reset",
        messages=[user("old ask"), user("Login fails after reset"), agent("Looking at the cache."), agent("Done.")],
        architecture={"components": ["auth", "cache", "auth"], "files": ["a.py", "b.py"], "domain": "Auth "},
        sprint={"current_story": "S-1 reset", "files": ["b.py", "c.py"], "components": ["cache"]},
    )
    q = build_query(s, (ind(GapReason.GATE_FAILURE, 0.5),), POLICY)  # no need text: the state speaks
    assert q.text.splitlines() == [
        "Task: Fix reset",
        "Story: S-1 reset",
        "User: Login fails after reset",
        "Done.",
        "Components: auth, cache",
    ]
    assert q.mentioned_files == ("a.py", "b.py", "c.py") and q.domain == "Auth"
    assert build_query(state(domain="billing", architecture={"domain": "auth"}), (), POLICY).domain == "billing"


def test_the_query_is_bounded() -> None:
    policy = GapPolicy(max_part_chars=20, max_query_chars=50, max_mentioned_files=2)
    s = state(task="x" * 100, messages=[agent("y " * 100)], architecture={"files": ["1", "2", "3"]})
    q = build_query(s, (Indicator(GapReason.EXPLICIT_FLAG, "s", 0.9, "e", "need " * 50),), policy)
    assert len(q.text) <= 50 and all(len(line) <= 20 for line in q.text.splitlines())
    assert q.text.startswith("need need") and q.mentioned_files == ("1", "2")


def test_a_state_with_nothing_to_say_still_gets_a_query() -> None:
    gap = detect_gap(cycle(500.0, 100.0), POLICY, now=NOW)
    assert gap is not None and gap.query.text == "long_cycle_time for agent dev"


# --- target ------------------------------------------------------------------------------------


def test_the_target_is_explicit_else_handoff_else_default() -> None:
    assert injection_target(state()) == DEFAULT_TARGET
    assert injection_target(state(handoff={"pending": False, "to_agent": "qa"})) == DEFAULT_TARGET
    assert injection_target(state(handoff={"pending": True})) == HANDOFF_TARGET
    assert injection_target(state(handoff={"status": "Pending"})) == HANDOFF_TARGET
    assert injection_target(state(handoff={"pending": True}, injection_target=" agent_notes ")) == "agent_notes"


def test_before_a_handoff_the_context_is_for_the_receiver() -> None:
    s = state(
        current_agent="dev", handoff={"pending": True, "target_agent": "qa"}, agent_output={"missing_context": True}
    )
    gap = detect_gap(s, POLICY, now=NOW)
    assert gap is not None and gap.agent == "qa" == needing_agent(s) and gap.target == HANDOFF_TARGET
    assert needing_agent(state(current_agent="dev", handoff={"pending": False, "to_agent": "qa"})) == "dev"


# --- policy ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"explicit_flag_weight": 0.0}, "explicit_flag_weight must be in"),
        ({"gate_failure_weight": 1.2}, "gate_failure_weight must be in"),
        ({"clarification_phrase_weight": 0.0}, "clarification_phrase_weight must be in"),
        ({"addressed_question_weight": 1.5}, "addressed_question_weight must be in"),
        ({"min_confidence": -0.1}, "min_confidence must be in"),
        ({"long_cycle_weight": math.nan}, "must be finite"),
        ({"long_cycle_ratio": 1.0}, "long_cycle_ratio must be above 1"),
        ({"circular_similarity": 1.5}, "circular_similarity must be in"),
        ({"circular_window": 2, "circular_min_repeats": 2}, "circular_min_repeats must be below"),
        ({"recent_messages": 0}, "recent_messages must be at least 1"),
        ({"max_query_chars": MAX_PROMPT_CHARS + 1}, "max_query_chars"),
        ({"max_part_chars": 3000}, "max_part_chars <= max_query_chars"),
        ({"max_mentioned_files": 201}, "max_mentioned_files"),
    ],
)
def test_the_policy_refuses_nonsense(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GapPolicy(**change)
