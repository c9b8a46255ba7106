"""Replay options: time windows, offset bounds, topic names, weights and overrides."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from ctxbus.contract.topics import Topics
from ctxbus.core.ranking import RankingWeights
from ctxbus.replay.options import (
    OptionError,
    Selection,
    UnknownTopic,
    parse_offsets,
    parse_overrides,
    parse_time,
    parse_weights,
    resolve_topics,
    to_ms,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
TOPICS = Topics("ctxbus")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2h", NOW - timedelta(hours=2)),
        ("90s", NOW - timedelta(seconds=90)),
        ("15m", NOW - timedelta(minutes=15)),
        ("1.5d", NOW - timedelta(hours=36)),
        ("1w", NOW - timedelta(days=7)),
        ("now", NOW),
        ("2026-04-30", datetime(2026, 4, 30, tzinfo=UTC)),
        ("2026-04-30T10:00:00Z", datetime(2026, 4, 30, 10, tzinfo=UTC)),
        ("2026-04-30T12:00:00+02:00", datetime(2026, 4, 30, 10, tzinfo=UTC)),
        ("2026-04-30T10:00", datetime(2026, 4, 30, 10, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_times(text: str, expected: datetime) -> None:
    got = parse_time(text, now=NOW)
    assert got == expected and got.utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["yesterday", "2h ago", "-5m", "2026-13-01", ""])
def test_bad_times_say_what_is_accepted(text: str) -> None:
    with pytest.raises(OptionError, match="ISO time"):
        parse_time(text, now=NOW)


def test_offsets_in_three_forms_the_most_specific_wins() -> None:
    bound = parse_offsets("100, 1:20, injected:1:5, ctxbus.deadletter.v1:0:7", TOPICS)
    assert bound.for_partition(TOPICS.retrieval_requested, 0) == 100
    assert bound.for_partition(TOPICS.retrieval_requested, 1) == 20
    assert bound.for_partition(TOPICS.context_injected, 1) == 5
    assert bound.for_partition(TOPICS.dead_letter, 0) == 7
    assert parse_offsets("2:3", TOPICS).for_partition(TOPICS.context_injected, 0) is None


@pytest.mark.parametrize(
    ("text", "match"),
    [("x", "whole number"), ("-1", "negative"), ("a:b", "whole"), ("nope:0:1", "unknown topic"), (",", "needs")],
)
def test_bad_offsets(text: str, match: str) -> None:
    with pytest.raises(OptionError, match=match):
        parse_offsets(text, TOPICS)


def test_topic_names_full_without_prefix_or_short() -> None:
    assert resolve_topics(["injected", "context.retrieval.requested.v1", "ctxbus.deadletter.v1"], TOPICS) == [
        TOPICS.context_injected,
        TOPICS.retrieval_requested,
        TOPICS.dead_letter,
    ]
    assert resolve_topics(["requested,completed", "requested"], TOPICS) == [
        TOPICS.retrieval_requested,
        TOPICS.retrieval_completed,
    ]
    assert resolve_topics([], TOPICS) == []


def test_an_unknown_topic_lists_every_valid_name() -> None:
    with pytest.raises(UnknownTopic) as err:
        resolve_topics(["injected", "ctxbus.context.injected.v2"], TOPICS)
    for topic in TOPICS.event_topics():
        assert topic in str(err.value)
    assert "'ctxbus.context.injected.v2'" in str(err.value)


def test_a_window_keeps_since_and_drops_until() -> None:
    window = Selection(since_ms=to_ms(NOW), until_ms=to_ms(NOW + timedelta(minutes=1)))
    assert window.windowed
    assert window.in_window(to_ms(NOW)) and not window.in_window(to_ms(NOW) - 1)
    assert not window.in_window(to_ms(NOW + timedelta(minutes=1)))
    assert Selection().in_window(0) and not Selection().windowed
    with pytest.raises(OptionError, match="later"):
        Selection(since_ms=10, until_ms=10)


def test_weights_over_the_defaults() -> None:
    w = parse_weights("domain=0.3, recency=0,half_life_days=30")
    assert (w.domain, w.recency, w.half_life_days) == (0.3, 0.0, 30.0)
    assert w.similarity == RankingWeights().similarity
    with pytest.raises(OptionError, match="NAME one of"):
        parse_weights("speed=1")
    with pytest.raises(OptionError, match="number"):
        parse_weights("domain=high")
    with pytest.raises(OptionError, match="non-negative"):
        parse_weights("domain=-1")


def test_overrides_become_the_requests_json_form() -> None:
    got = parse_overrides(["min_importance=0.5", 'preferred_kinds=["decision"]', "note=plain words"])
    assert {k: json.loads(v) for k, v in got.items()} == {
        "min_importance": 0.5,
        "preferred_kinds": ["decision"],
        "note": "plain words",
    }
    with pytest.raises(OptionError, match="KEY=VALUE"):
        parse_overrides(["no-equals"])


def test_other_zones_are_converted() -> None:
    east = timezone(timedelta(hours=5))
    assert parse_time(datetime(2026, 1, 1, 5, tzinfo=east).isoformat(), now=NOW) == datetime(2026, 1, 1, tzinfo=UTC)
