"""Gap filling's four sources: the state's decisions and messages, sprint and architecture hints
next to memory; relevance, deduplication, labels, budget shares and bounds."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxbus.core.agent_state import AgentState, parse_state
from ctxbus.core.gap_sources import (
    SOURCE_TITLES,
    GapSource,
    SourcePolicy,
    compose,
    local_snippets,
    plan_local,
    render,
)
from ctxbus.core.gaps import Gap, GapPolicy, detect_gap
from ctxbus.core.tokens import estimate_tokens

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "agent_state_gap.json"
NOW = datetime(2024, 6, 3, 9, 30, tzinfo=UTC)
POLICY = SourcePolicy()
MEMORY = "## Learned Patterns (Auto-Injected)\n### Password reset revokes sessions\n- Revoke every refresh token."


def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SAMPLE.read_text())
    return data


def gap_of(state: AgentState) -> Gap:
    gap = detect_gap(state, GapPolicy(), now=NOW)
    assert gap is not None
    return gap


def with_gap(**sections: Any) -> tuple[AgentState, Gap]:
    base = {
        "current_agent": "dev",
        "task": "Fix login failing after a password reset",
        "agent_output": {"missing_context": ["what happens to sessions and refresh tokens after a password reset"]},
    }
    state = parse_state({**base, **sections})
    return state, gap_of(state)


def test_the_sample_states_own_context_comes_from_all_three_local_sources() -> None:
    state = parse_state(sample())
    snippets = local_snippets(state, gap_of(state), POLICY)
    found = {(s.source, s.kind, s.text) for s in snippets}
    assert (GapSource.STATE, "decision (architect)", "Sessions are cached in Redis for 15 minutes") in found
    assert (GapSource.SPRINT, "related stories", "STORY-139 Session cache TTL") in found
    assert (GapSource.ARCHITECTURE, "adrs", "ADR-007 token lifetimes") in found
    sm = [s for s in snippets if s.kind == "message (sm)"]
    assert len(sm) == 1 and sm[0].text.startswith("Delegating STORY-142 to dev")
    # the agent's own messages and the messages the query is made of are not handed back to it
    assert not any(s.kind in ("message (dev)", "message (user)") for s in snippets)
    assert all(0.0 < s.relevance <= 1.0 for s in snippets) and {s.origin for s in snippets} >= {
        "decisions[0]",
        "messages[1]",
        "sprint.related_stories[0]",
        "architecture.adrs[0]",
    }


def test_composed_context_is_labelled_by_source_in_a_fixed_order() -> None:
    state = parse_state(sample())
    plan = plan_local(state, gap_of(state), POLICY, max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens)
    composed = compose(
        MEMORY, plan.snippets, max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens, memory_items=1
    )
    titles = [line for line in composed.text.splitlines() if line.startswith("# ")]
    assert titles == [SOURCE_TITLES[s] for s in GapSource]
    assert composed.text.startswith(f"{SOURCE_TITLES[GapSource.MEMORY]}\n{MEMORY}\n\n")
    assert "- decision (architect): Sessions are cached in Redis for 15 minutes" in composed.text
    assert composed.counts() == {"memory": 1, "state": 2, "sprint": 1, "architecture": 1}
    alone = compose("", plan.snippets, max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens, memory_items=1)
    assert not alone.text.startswith(SOURCE_TITLES[GapSource.MEMORY]) and alone.counts()["memory"] == 0
    nothing = compose("", (), max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens, memory_items=1)
    assert nothing.text == "" and nothing.counts() == dict.fromkeys(("memory", "state", "sprint", "architecture"), 0)


def test_what_is_unrelated_to_the_gap_is_left_out() -> None:
    state, gap = with_gap(
        decisions=["Invoices are rounded to cents once, after summing", "Password resets revoke every session"],
        sprint={"goal": "Ship the billing export", "stories": ["STORY-150 Password reset emails expire after an hour"]},
        architecture={"constraints": ["All services log in JSON"], "adrs": [{"id": "ADR-012", "title": "CSV exports"}]},
    )
    texts = [s.text for s in local_snippets(state, gap, POLICY)]
    assert "Password resets revoke every session" in texts
    assert "STORY-150 Password reset emails expire after an hour" in texts
    assert not any("Invoices" in t or "billing" in t or "CSV" in t for t in texts)


def test_duplicates_are_kept_once_and_what_memory_already_says_is_dropped() -> None:
    state, gap = with_gap(
        decisions=["Password resets revoke every session.", {"summary": "Refresh tokens are revoked on reset"}],
        architecture={"decisions": ["password resets   REVOKE every session"]},
        sprint={"notes": ["Revoke every refresh token."]},
    )
    snippets = local_snippets(state, gap, POLICY)
    assert [s.text for s in snippets if "every session" in s.text.lower()] == ["Password resets revoke every session."]
    composed = compose(
        MEMORY, snippets, max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens, memory_items=1
    )
    assert [s.text for s in composed.dropped] == ["Revoke every refresh token."]
    assert composed.text.count("Revoke every refresh token") == 1 and composed.counts()["sprint"] == 0


def test_each_source_and_each_item_is_bounded() -> None:
    decisions = [f"Decision {i}: password reset revokes refresh tokens of sessions, variant {i}" for i in range(50)]
    long = "password reset sessions " * 200
    state, gap = with_gap(decisions=decisions, sprint={"notes": [long]})
    snippets = local_snippets(state, gap, SourcePolicy(max_per_source=3, max_items=4, max_item_chars=120))
    assert len(snippets) == 4 and sum(s.source is GapSource.STATE for s in snippets) == 3
    assert all(len(s.text) <= 120 for s in snippets) and any(s.text.endswith("…") for s in snippets)
    assert [s.origin for s in snippets if s.source is GapSource.STATE] == [
        "decisions[49]",
        "decisions[48]",
        "decisions[47]",
    ]


@pytest.mark.parametrize(("max_chars", "max_tokens"), [(10_000, 2_000), (600, 2_000), (10_000, 60), (200, 40)])
def test_the_local_sources_take_their_share_and_the_whole_stays_in_the_budget(max_chars: int, max_tokens: int) -> None:
    decisions = [f"Password reset decision {i}: revoke refresh tokens and cached sessions ({i})" for i in range(30)]
    state, gap = with_gap(decisions=decisions)
    policy = SourcePolicy(max_items=30, max_per_source=30)
    plan = plan_local(state, gap, policy, max_chars=max_chars, max_tokens=max_tokens, count_tokens=estimate_tokens)
    local = render("", plan.snippets)
    assert len(local) <= max_chars * policy.local_share and estimate_tokens(local) <= max_tokens * policy.local_share
    assert plan.memory_chars >= 1 and plan.memory_tokens >= 1
    memory = ("- revoke refresh tokens " * 1000)[: plan.memory_chars]
    while estimate_tokens(memory) > plan.memory_tokens:
        memory = memory[: len(memory) // 2]
    composed = compose(
        memory, plan.snippets, max_chars=max_chars, max_tokens=max_tokens, count_tokens=estimate_tokens, memory_items=1
    )
    assert len(composed.text) <= max_chars and estimate_tokens(composed.text) <= max_tokens


def test_an_empty_state_has_nothing_of_its_own_and_the_input_is_untouched() -> None:
    raw = sample()
    before = copy.deepcopy(raw)
    state = parse_state(raw)
    local_snippets(state, gap_of(state), POLICY)
    assert raw == before
    bare, gap = with_gap()
    assert local_snippets(bare, gap, POLICY) == []
    plan = plan_local(bare, gap, POLICY, max_chars=10_000, max_tokens=2_000, count_tokens=estimate_tokens)
    assert plan.snippets == () and plan.memory_chars > 9_900


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_items": 0}, "max_items must be at least 1"),
        ({"local_share": 0.0}, "local_share must be in"),
        ({"local_share": 1.5}, "local_share must be in"),
        ({"min_relevance": 1.5}, "min_relevance must be in"),
        ({"max_item_chars": 10}, "max_item_chars must be at least 20"),
    ],
)
def test_the_source_policy_refuses_nonsense(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourcePolicy(**change)
