"""The replay benchmark's synthetic events are real events: every one decodes through the contract's
serde (validated), and the counts it expects are the ones a join finds."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from ctxbus.bench.replay import check
from ctxbus.bench.replay_events import FOREIGN_RECORDS, synthetic_events
from ctxbus.contract.serde import EventDecodeError, EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.replay.decode import Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.facts import RawRecord
from ctxbus.replay.join import Joiner
from ctxbus.replay.report import build_report
from ctxbus.replay.report_model import Source

TOPICS = Topics("b")
NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def test_synthetic_events_validate_and_the_report_matches_what_was_made() -> None:
    records, expected = synthetic_events(TOPICS, 1_500, now=NOW, span_s=600, seed=3)
    assert len(records) == expected.events >= 1_500
    deserialize = EventDeserializer()
    kinds: Counter[str] = Counter()
    foreign = 0
    for rec in records:
        if rec.topic == TOPICS.dead_letter:
            kinds["dead letter"] += 1
            continue
        try:
            kinds[deserialize(rec.value).event_type] += 1
        except EventDecodeError:
            foreign += 1
    assert foreign == FOREIGN_RECORDS
    assert kinds["context.retrieval.requested"] == expected.chains
    assert kinds["context.injected"] == expected.injected == expected.chains - expected.dead_letters
    assert kinds["context.outcome.recorded"] == expected.sessions
    decoder = Decoder(topic_types(TOPICS), TOPICS.dead_letter)
    facts, stats = decoder.decode(
        [RawRecord(r.topic, 0, i, r.timestamp_ms, r.value, tuple(r.headers)) for i, r in enumerate(records)]
    )
    joiner = Joiner()
    joiner.add(facts)
    report = build_report(joiner.finish(), stats, Source(topics=TOPICS.all()))
    assert check(report, expected) == []


def test_check_names_what_differs() -> None:
    records, expected = synthetic_events(TOPICS, 300, now=NOW, seed=4)
    decoder = Decoder(topic_types(TOPICS), TOPICS.dead_letter)
    facts, stats = decoder.decode([RawRecord(r.topic, 0, 0, 0, r.value, tuple(r.headers)) for r in records[:-10]])
    joiner = Joiner()
    joiner.add(facts)
    problems = check(build_report(joiner.finish(), stats, Source(topics=TOPICS.all())), expected)
    assert any(p.startswith("records:") for p in problems)
