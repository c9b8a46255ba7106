"""The report's figures, computed from chains whose numbers are known."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ctxbus.contract.payloads import Outcome
from ctxbus.replay.chain_rows import CHAIN_COLUMNS, chain_rows
from ctxbus.replay.decode import Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.facts import DeadLetterFact, DecodeStats, RawRecord
from ctxbus.replay.join import Joiner
from ctxbus.replay.report import build_report, time_step, token_bucket
from ctxbus.replay.report_model import Report, Source, Stats, percentile

from .events import T0, TOPICS, chain, outcome, raw


def test_nearest_rank_percentiles_are_observed_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, q) for q in (50, 90, 95, 99, 100)] == [50.0, 90.0, 95.0, 99.0, 100.0]
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    s = Stats.of([3.0, 1.0, 2.0])
    assert (s.count, s.mean, s.p50, s.min, s.max) == (3, 2.0, 2.0, 1.0, 3.0)
    assert Stats.of([]).count == 0 and Stats.of([]).p50 is None


def test_token_buckets_and_time_steps() -> None:
    assert [token_bucket(t) for t in (0, 1, 100, 101, 4_000, 4_001)] == [
        "0",
        "1-100",
        "1-100",
        "101-250",
        "2001-4000",
        ">4000",
    ]
    assert time_step(0, 10 * 1_000_000) == 1
    assert time_step(0, 3_600 * 1_000_000) == 300  # an hour in 5 minute buckets (12 of them)
    assert time_step(0, 3 * 86_400 * 1_000_000) == 3 * 3_600


def _report(*events: object, dead: list[DeadLetterFact] | None = None, extra: list[RawRecord] | None = None) -> Report:
    decoder = Decoder(topic_types(TOPICS), TOPICS.dead_letter)
    facts, stats = decoder.decode([*(raw(e) for e in events), *(extra or [])])  # type: ignore[arg-type]
    joiner = Joiner()
    joiner.add(facts)
    joiner.add(dead or [])
    return build_report(joiner.finish(), stats, Source(topics=TOPICS.all()), top=3)


@pytest.fixture
def report() -> Report:
    # ten requests in two sessions: latencies 10..100 ms end to end, 1..10 items, one empty injection
    events: list[object] = []
    for i in range(10):
        session = "good" if i < 6 else "bad"
        items = tuple(f"m{j}" for j in range(i + 1)) if i != 9 else ()
        events.extend(
            chain(
                session=session,
                at=T0 + timedelta(minutes=i),
                retrieved=(*items, "never"),
                injected=items,
                stage_ms=(i * 10 + 5, 5),
                tokens=100 * (i + 1),
                role="planner" if i % 2 else "implementer",
                fingerprint=f"fp{i % 3}",
                empty_reason="nothing_relevant_enough",
            )
        )
    events.append(outcome(Outcome.SUCCESSFUL, session="good", at=T0 + timedelta(hours=1)))
    events.append(outcome(Outcome.FAILED, session="bad", at=T0 + timedelta(hours=1)))
    dead = DeadLetterFact(
        partition=0,
        offset=1,
        timestamp_ms=int((T0 + timedelta(minutes=3)).timestamp() * 1000),
        original_topic=TOPICS.retrieval_requested,
        original_partition=0,
        original_offset=7,
        consumer_group="t.retriever",
        error_class="EventDecodeError",
        reason="undecodable",
        error_message="undecodable: magic byte is 104",
        attempts=1,
        event_type=None,
        correlation_id=None,
    )
    foreign = RawRecord(TOPICS.retrieval_requested, 0, 99, 0, b"not an event")
    return _report(*events, dead=[dead], extra=[foreign])


def test_chain_counts(report: Report) -> None:
    assert report.records == 33 and report.decoded == 32
    assert report.chains == {
        "total": 10,
        "injected": 9,
        "empty": 1,
        "dead_lettered": 0,
        "not_injected": 0,
        "not_completed": 0,
        "complete": 10,
        "with_outcome": 10,
    }
    assert [(c.key, c.count) for c in report.skipped] == [("bad_framing", 1)]


def test_latency_percentiles(report: Report) -> None:
    e2e = report.latency_ms["end_to_end"]
    assert (e2e.count, e2e.p50, e2e.p90, e2e.max, e2e.min) == (10, 50.0, 90.0, 100.0, 10.0)
    assert report.latency_ms["completed_to_injected"].p99 == 5.0
    assert report.latency_ms["request_to_completed"].p50 == 45.0
    assert report.latency_ms["retrieval"].mean == 20.0


def test_sizes_and_empty_reasons(report: Report) -> None:
    tokens = report.sizes["tokens"]
    assert tokens.count == 10 and tokens.max == 900 and tokens.min == 0  # the empty one has 0 tokens
    assert report.sizes["items"].max == 9
    assert [(c.key, c.count) for c in report.empty_reasons] == [("nothing_relevant_enough", 1)]
    # 0, 100, 200, 300 .. 900 tokens
    histogram = {c.key: c.count for c in report.token_histogram}
    assert histogram == {"0": 1, "1-100": 1, "101-250": 1, "251-500": 3, "501-1000": 4}


def test_items_most_and_least_injected(report: Report) -> None:
    most = report.items_most
    # m0 is in every non-empty injection (9), m1 in 8 ...; m0 went 6 times to the good session, 3 to the bad
    assert [(r.item_id, r.injected, r.retrieved, r.successful, r.failed) for r in most] == [
        ("m0", 9, 9, 6, 3),
        ("m1", 8, 8, 5, 3),
        ("m2", 7, 7, 4, 3),
    ]
    least = report.items_least[0]
    assert (least.item_id, least.injected, least.retrieved, least.injection_rate) == ("never", 0, 10, 0.0)
    assert report.distinct_items == 9


def test_success_rates_by_group(report: Report) -> None:
    assert report.outcomes == {"successful": 6, "partial": 0, "failed": 4, "unknown": 0, "no_outcome": 0}
    profiles = {r.key: r for r in report.success_by["profile"]}
    # implementer: requests 0,2,4 (good) and 6,8 (bad); planner: 1,3,5 (good) and 7,9 (bad)
    assert (profiles["implementer"].successful, profiles["implementer"].failed) == (3, 2)
    assert profiles["implementer"].success_rate == pytest.approx(0.6)
    assert profiles["planner"].empty == 1 and profiles["planner"].injected == 4
    fingerprints = {r.key: r.chains for r in report.success_by["fingerprint"]}
    assert fingerprints == {"fp0": 4, "fp1": 3, "fp2": 3}
    assert {r.key for r in report.success_by["task_type"]} == {"bugfix"}
    assert report.success_by["agent"][0].chains == 10


def test_dead_letters_and_timeline(report: Report) -> None:
    assert report.dead_letters == 1
    assert {k: [(c.key, c.count) for c in v] for k, v in report.dead_letters_by.items()}["by_reason"] == [
        ("undecodable", 1)
    ]
    assert report.dead_letter_samples[0].error_class == "EventDecodeError"
    assert report.timeline_step_s == 30  # ten minutes in 30 second buckets
    assert sum(b.requests for b in report.timeline) == 10
    assert sum(b.dead_letters for b in report.timeline) == 1
    assert sum(b.empty for b in report.timeline) == 1
    assert (sum(b.successful for b in report.timeline), sum(b.failed for b in report.timeline)) == (6, 4)


def test_the_json_form_and_the_chain_rows(report: Report) -> None:
    data = report.to_dict()
    assert data["chains"]["total"] == 10 and data["latency_ms"]["end_to_end"]["p90"] == 90.0
    assert data["success_by"]["profile"][0]["success_rate"] is not None
    assert data["skipped"] == {"bad_framing": 1}


def test_chain_rows_have_every_column() -> None:
    decoder = Decoder(topic_types(TOPICS), TOPICS.dead_letter)
    facts, _ = decoder.decode([raw(e) for e in chain(injected=("a",))])
    joiner = Joiner()
    joiner.add(facts)
    (row,) = chain_rows(joiner.finish().chains)
    assert set(row) == set(CHAIN_COLUMNS)
    assert row["injected_item_ids"] == ["a"] and row["status"] == "injected" and row["end_to_end_ms"] == 35.0


def test_an_empty_read_is_an_empty_report() -> None:
    joiner = Joiner()
    report = build_report(joiner.finish(), DecodeStats(), Source(topics=TOPICS.all()))
    assert report.empty and report.chains["total"] == 0 and report.timeline == []
    assert report.latency_ms["end_to_end"].count == 0


def test_global_items_are_counted_under_the_global_scope() -> None:
    from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted
    from ctxbus.memory.model import GLOBAL_PROJECT

    from .events import ranked

    req, done, inj = chain(retrieved=("local", "shared"), injected=("shared", "local"))
    assert isinstance(done.payload, RetrievalCompleted) and isinstance(inj.payload, ContextInjected)
    shared = ranked("shared").model_copy(update={"project": GLOBAL_PROJECT})
    done = done.model_copy(update={"payload": done.payload.model_copy(update={"items": (ranked("local"), shared)})})
    inj = inj.model_copy(update={"payload": inj.payload.model_copy(update={"global_item_ids": ("shared",)})})
    report = _report(req, done, inj)
    assert {(r.project, r.item_id, r.injected, r.retrieved) for r in report.items_most} == {
        ("acme/web", "local", 1, 1),
        (GLOBAL_PROJECT, "shared", 1, 1),
    }
