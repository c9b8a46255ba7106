"""What a backtest setting does to a historical request, which chains it re-runs, and where it looks
for their requests (the handlers themselves run in tests/integration/test_replay.py)."""

from __future__ import annotations

import json

import pytest

from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.core.ranking import RankingWeights
from ctxbus.replay.backtest import (
    REQUEST_SLACK_MS,
    BacktestError,
    BacktestSettings,
    candidates,
    request_of,
    request_window,
)
from ctxbus.replay.decode import Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.join import Joiner
from ctxbus.replay.options import OffsetBound, Selection

from .events import TOPICS, chain, raw


def test_the_setting_goes_into_the_request() -> None:
    request = RetrievalRequested(
        agent_name="a", prompt="p", trigger=Trigger.USER_PROMPT, profile_overrides={"preserve_head": "1"}
    )
    chosen = BacktestSettings(profile="planner", overrides={"min_importance": "0.6"}, max_tokens=500, max_items=3)
    changed = chosen.apply(request)
    assert changed.agent_role == "planner" and changed.max_tokens == 500 and changed.max_items == 3
    assert changed.profile_overrides == {"preserve_head": "1", "min_importance": "0.6"}
    assert changed.prompt == "p" and changed.max_chars == request.max_chars
    assert BacktestSettings().apply(request) is request


@pytest.mark.parametrize(
    ("chosen", "match"),
    [
        (BacktestSettings(profile="wizard"), "valid profiles"),
        (BacktestSettings(overrides={"nope": "1"}), "unknown profile override"),
        (BacktestSettings(overrides={"min_importance": "7"}), "0..1"),
        (BacktestSettings(max_tokens=0), "budget"),
        (BacktestSettings(baseline="yesterday"), "baseline"),
        (BacktestSettings(limit=0), "limit"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_before_anything_runs(chosen: BacktestSettings, match: str) -> None:
    with pytest.raises(BacktestError, match=match):
        chosen.check()


def test_describe_names_only_what_changes() -> None:
    described = BacktestSettings(
        profile="helper", weights=RankingWeights(recency=1.0), overrides={"x": "[1]"}
    ).describe()
    assert described["profile"] == "helper" and described["overrides"] == {"x": [1]}
    assert "max_tokens" not in described and described["weights"]["half_life_days"] == 90.0
    assert json.dumps(described)


def _chains() -> list:  # type: ignore[type-arg]
    injected = chain(session="a")
    requested_only = chain(session="b")[0]
    facts, _ = Decoder(topic_types(TOPICS), TOPICS.dead_letter).decode([raw(e) for e in (*injected, requested_only)])
    joiner = Joiner()
    joiner.add(facts)
    return joiner.finish().chains


def test_candidates_against_history_need_an_injection_and_keep_the_latest() -> None:
    chains = _chains()
    picked, left_out = candidates(chains, BacktestSettings())
    assert [c.session_id for c in picked] == ["a"] and left_out == {"no_injection_to_compare": 1}
    picked, left_out = candidates(chains, BacktestSettings(baseline="rerun", limit=1))
    assert len(picked) == 1 and left_out == {"over_limit": 1}


def test_requests_are_looked_for_a_little_before_the_window_on_every_offset() -> None:
    window = Selection(since_ms=1_000_000, until_ms=2_000_000, to_offsets=OffsetBound(default=3))
    wider = request_window(window)
    assert wider.since_ms == 1_000_000 - REQUEST_SLACK_MS and wider.until_ms == 2_000_000
    assert wider.to_offsets is None and wider.from_offsets is None
    assert request_window(Selection()) == Selection()


def test_a_completed_event_gives_back_its_request() -> None:
    req, done, inj = chain()
    rebuilt = request_of(done)
    assert rebuilt is not None
    assert rebuilt.payload == req.payload and rebuilt.event_id == req.event_id
    assert rebuilt.correlation_id == req.correlation_id and rebuilt.emitted_at == req.emitted_at
    assert rebuilt.session_id == req.session_id and rebuilt.project == req.project
    assert request_of(req) is req and request_of(inj) is None
