"""The dashboard's pure aggregation: percentiles, per-minute and per-second buckets, ring buffers,
project views, and every structure bounded whatever the number of events."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, ContextSource, DeadLetter, RetrievalRequested, Trigger
from ctxbus.dashboard.aggregate import STAGES, Aggregator
from ctxbus.dashboard.rows import (
    DeadLetterRow,
    InjectionRow,
    SkippedRow,
    dead_letter_reason,
    dead_letter_row,
    injection_row,
)
from ctxbus.dashboard.series import LATENCY_BOUNDS_MS, LatencyHistogram, MinuteSeries, SecondCounter, percentiles

T0 = 1_800_000_000.0  # a minute boundary (divisible by 60)


def row(
    at: float = T0,
    *,
    project: str = "acme/web",
    chars: int = 400,
    e2e: float | None = 40.0,
    retrieval: float = 20.0,
    assembly: float = 1.0,
    trigger: str = "user_prompt",
    reason: str | None = None,
    event_id: str | None = None,
) -> InjectionRow:
    return InjectionRow(
        event_id=event_id or str(uuid.uuid4()),
        correlation_id=str(uuid.uuid4()),
        at=at,
        received_at=at + 0.005,
        project=project,
        session="s1",
        agent="claude-code",
        trigger=trigger,
        items=0 if chars == 0 else 2,
        chars=chars,
        size_bytes=chars,
        tokens=chars // 4,
        truncated=False,
        empty_reason=reason if chars == 0 else None,
        source="rag_query",
        e2e_ms=e2e,
        retrieval_ms=retrieval,
        assembly_ms=assembly,
    )


def dead(at: float = T0, project: str | None = "acme/web", reason: str = "validation_failed") -> DeadLetterRow:
    return DeadLetterRow(
        at=at,
        project=project,
        original_topic="ctxbus.context.retrieval.requested.v1",
        original_partition=1,
        original_offset=7,
        consumer_group="ctxbus.retriever",
        reason=reason,
        error_class="InvalidEvent",
        error_message=f"{reason}: prompt too long",
        attempts=1,
    )


# ---------------------------------------------------------------------------------------------- statistics


def test_percentiles_are_nearest_rank_and_none_without_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentiles(values) == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}
    assert percentiles([3.0, 1.0, 2.0], (0.0, 100.0)) == {"p0": 1.0, "p100": 3.0}


def test_latency_histogram_interpolates_inside_a_bucket_and_caps_at_the_largest_value() -> None:
    h = LatencyHistogram()
    assert h.quantile(0.5) is None
    for _ in range(10):
        h.add(12.0)  # all in the (10, 15] bucket
    assert 10.0 < h.quantile(0.5) <= 12.0  # type: ignore[operator]
    assert h.quantile(0.99) == 12.0  # never above what was seen
    over = LatencyHistogram()
    over.add(LATENCY_BOUNDS_MS[-1] * 3)
    assert over.quantile(0.5) == LATENCY_BOUNDS_MS[-1] * 3
    mixed = LatencyHistogram()
    for v in [1.0] * 90 + [900.0] * 10:
        mixed.add(v)
    assert mixed.quantile(0.5) <= 1.0  # type: ignore[operator]
    assert 750.0 < mixed.quantile(0.99) <= 900.0  # type: ignore[operator]


def test_minute_series_is_zero_filled_and_drops_old_minutes() -> None:
    series = MinuteSeries(minutes=5)
    for i in range(12):  # twelve consecutive minutes, two events each
        for _ in range(2):
            bucket = series.bucket(T0 + i * 60 + 1)
            assert bucket is not None
            bucket.injections += 1
    assert len(series) <= 6
    assert series.bucket(T0) is None  # older than the window now
    out = series.series(now=T0 + 11 * 60 + 30)
    assert [m["t"] for m in out] == [T0 + i * 60 for i in range(7, 12)]
    assert [m["injections"] for m in out] == [2] * 5
    # a quiet stretch shows as zeros up to now
    later = series.series(now=T0 + 14 * 60)
    assert [m["injections"] for m in later] == [2, 2, 0, 0, 0]


def test_second_counter_counts_the_last_minute_only() -> None:
    counter = SecondCounter(60)
    for s in range(120):
        counter.add(T0 + s)
    assert counter.total(T0 + 119) == 60
    assert counter.total(T0 + 119 + 30) == 30
    assert counter.total(T0 + 119 + 61) == 0
    counter.add(T0)  # too old for the ring: ignored, not counted into a newer second
    assert counter.total(T0 + 119) == 60


# ---------------------------------------------------------------------------------------------- rows from events


def injected_event(
    *, context: str, reason: str | None, request_age_ms: float | None = 35.0
) -> Envelope[ContextInjected]:
    now = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
    request = Envelope.root(
        RetrievalRequested(agent_name="claude-code", prompt="fix login", trigger=Trigger.USER_PROMPT),
        project="acme/web",
        session_id="sess-9",
        producer="test",
        now=now,
    )
    payload = ContextInjected(
        context_source=ContextSource.RAG_QUERY if context else ContextSource.NONE,
        pattern_count=1 if context else 0,
        context_size_bytes=len(context.encode()),
        retrieval_duration_ms=21,
        agent_name="claude-code",
        trigger=Trigger.SESSION_START,
        context=context,
        context_chars=len(context),
        token_estimate=len(context) // 4,
        item_ids=("m1",) if context else (),
        empty_reason=reason,
        assembly_duration_ms=0.7,
        request_emitted_at=None if request_age_ms is None else now,
    )
    return request.caused(payload, producer="injector", now=now + timedelta(milliseconds=request_age_ms or 0))


def test_injection_row_takes_the_event_fields_and_the_end_to_end_time() -> None:
    event = injected_event(context="### Use the reset token once\nbody", reason=None)
    r = injection_row(event, received_at=event.emitted_at.timestamp() + 0.25)
    assert (r.project, r.session, r.agent, r.trigger) == ("acme/web", "sess-9", "claude-code", "session_start")
    assert (r.items, r.chars, r.tokens, r.empty_reason, r.empty) == (1, 33, 8, None, False)
    assert r.e2e_ms == pytest.approx(35.0)
    stages = r.stage_ms()
    assert stages["retrieval"] == 21.0 and stages["assembly"] == 0.7
    assert stages["transit"] == pytest.approx(35.0 - 21.0 - 0.7)
    assert stages["delivery"] == pytest.approx(250.0)
    assert r.as_dict()["id"] == str(event.event_id)


def test_an_empty_injection_keeps_its_reason_and_one_without_a_reason_says_so() -> None:
    with_reason = injection_row(injected_event(context="", reason="nothing_relevant_enough"), received_at=0.0)
    assert with_reason.empty and with_reason.empty_reason == "nothing_relevant_enough"
    without = injection_row(injected_event(context="", reason=None, request_age_ms=None), received_at=0.0)
    assert without.empty_reason == "unspecified"
    assert without.e2e_ms is None and "end_to_end" not in without.stage_ms()


def test_dead_letter_reason_is_the_runner_slug_else_the_error_class() -> None:
    def record(message: str) -> DeadLetter:
        return DeadLetter(
            original_topic="t",
            original_partition=0,
            original_offset=3,
            consumer_group="g",
            error_class="InvalidEvent",
            error_message=message,
            failed_at=datetime(2026, 1, 1, tzinfo=UTC),
        )

    assert dead_letter_reason(record("retries_exhausted: TimeoutError()")) == "retries_exhausted"
    assert dead_letter_reason(record("something odd happened")) == "InvalidEvent"
    assert dead_letter_reason(record("Not A Slug: x")) == "InvalidEvent"
    long = record("validation_failed: " + "x" * 5_000)
    assert len(dead_letter_row(long, None).error_message) == 300


# ---------------------------------------------------------------------------------------------- the aggregator


def test_totals_triggers_reasons_and_newest_rows_first() -> None:
    agg = Aggregator(rows=10)
    ids = []
    for i in range(6):
        r = row(T0 + i, chars=0 if i % 3 == 0 else 500, reason="no_memories_in_project", trigger="user_prompt")
        ids.append(r.event_id)
        agg.add_injection(r)
    agg.add_injection(row(T0 + 10, trigger="gap"))
    snap = agg.snapshot(now=T0 + 20, rows=3)
    assert snap["totals"]["injections"] == 7 and snap["totals"]["empty"] == 2
    assert snap["triggers"] == {"user_prompt": 6, "gap": 1}
    assert snap["empty_reasons"] == {"no_memories_in_project": 2}
    assert len(snap["recent"]) == 3 and snap["recent"][1]["id"] == ids[5]  # newest first
    assert [r["id"] for r in snap["recent_empty"]] == [ids[3], ids[0]]
    assert snap["last_60s"] == 7
    assert sum(snap["sizes"]["counts"]) == 7 and snap["sizes"]["counts"][0] == 2  # two empty (0 chars)
    json.dumps(snap)  # JSON-ready as it is


def test_rows_are_newest_first_by_time_whatever_order_they_are_read_in() -> None:
    """Issue 21: the feed reads partitions in turn, so rows arrive out of time order; the page shows time order
    (newest first), and a full ring keeps the newest rows, not the last ones read."""
    agg = Aggregator(rows=4, project_rows=4)
    read_order = [5, 1, 7, 3, 6, 2, 8, 4]  # seconds after T0, as three partitions interleave
    rows = {at: row(T0 + at, chars=0, reason="nothing_relevant_enough") for at in read_order}
    for at in read_order:
        agg.add_injection(rows[at])
    for at in (3, 9, 1):
        agg.add_dead_letter(dead(T0 + at))
    newest = [rows[at].event_id for at in (8, 7, 6, 5)]
    for snap in (agg.snapshot(now=T0 + 20, rows=4), agg.snapshot(now=T0 + 20, project="acme/web", rows=4)):
        assert [r["id"] for r in snap["recent"]] == newest
        assert [r["id"] for r in snap["recent_empty"]] == newest
        assert [r["at"] for r in snap["dead_letters"]["recent"]] == [T0 + 9, T0 + 3, T0 + 1]
    agg.add_injection(row(T0 + 0.5))  # older than every row kept: not shown
    assert [r["id"] for r in agg.snapshot(now=T0 + 20, rows=4)["recent"]] == newest
    for offset, at in enumerate((T0 + 2, T0 + 1, T0 + 3)):
        agg.add_skipped(SkippedRow(at, "p.context.injected.v1", 0, offset, "undecodable", ""))
    assert [r["offset"] for r in agg.snapshot(now=T0 + 20)["skipped"]["recent"]] == [2, 0, 1]


def test_latency_percentiles_per_stage_over_the_window() -> None:
    agg = Aggregator(latency_window=100)
    for i in range(1, 201):  # only the last 100 (e2e 101..200) stay in the window
        agg.add_injection(row(T0, e2e=float(i), retrieval=float(i) / 2, assembly=0.5))
    stages = agg.snapshot(now=T0)["latency"]["stages"]
    assert set(stages) == set(STAGES)
    assert stages["end_to_end"]["n"] == 100
    assert (stages["end_to_end"]["p50"], stages["end_to_end"]["p99"]) == (150.0, 199.0)
    assert stages["end_to_end"]["max"] == 200.0
    assert stages["retrieval"]["p50"] == 75.0
    assert stages["transit"]["p50"] == pytest.approx(150.0 - 75.0 - 0.5)


def test_the_project_filter_shows_only_that_project() -> None:
    agg = Aggregator()
    for i in range(3):
        agg.add_injection(row(T0 + i, project="acme/web"))
    agg.add_injection(row(T0, project="other/app", chars=0, reason="empty_prompt"))
    agg.add_dead_letter(dead(project="other/app"))
    agg.add_dead_letter(dead(project=None, reason="undecodable"))
    acme = agg.snapshot(now=T0 + 5, project="acme/web")
    other = agg.snapshot(now=T0 + 5, project="other/app")
    everyone = agg.snapshot(now=T0 + 5)
    assert acme["project"] == "acme/web" and acme["totals"]["injections"] == 3
    assert {r["project"] for r in acme["recent"]} == {"acme/web"}
    assert acme["totals"]["dead_letters"] == 0 and acme["empty_reasons"] == {}
    assert other["totals"]["injections"] == 1 and other["empty_reasons"] == {"empty_prompt": 1}
    assert other["dead_letters"]["by_reason"] == {"validation_failed": 1}
    assert everyone["totals"]["injections"] == 4
    assert everyone["dead_letters"]["by_reason"] == {"validation_failed": 1, "undecodable": 1}
    assert [p["name"] for p in everyone["projects"]] == ["acme/web", "other/app"]
    unknown = agg.snapshot(now=T0, project="nobody")
    assert unknown["totals"]["injections"] == 0 and unknown["recent"] == []
    assert "nobody" not in agg.project_names  # looking does not create a view


def test_dead_letters_and_skipped_messages_are_counted_per_minute_and_by_reason() -> None:
    agg = Aggregator()
    agg.add_dead_letter(dead(T0 + 61, reason="retries_exhausted"))
    agg.add_dead_letter(dead(T0 + 62, reason="retries_exhausted"))
    for offset in range(3):
        agg.add_skipped(SkippedRow(T0, "p.context.injected.v1", 0, offset, "undecodable", "5 bytes"))
    agg.add_skipped(SkippedRow(T0, "p.deadletter.v1", 1, 9, "no_dead_letter_header", "missing"))
    snap = agg.snapshot(now=T0 + 90)
    assert snap["totals"]["dead_letters"] == 2
    assert snap["minutes"][-1]["dead_letters"] == 2 and snap["minutes"][-1]["t"] == T0 + 60
    assert snap["skipped"]["total"] == 4
    assert snap["skipped"]["by_reason"] == [
        {"topic": "p.context.injected.v1", "reason": "undecodable", "count": 3},
        {"topic": "p.deadletter.v1", "reason": "no_dead_letter_header", "count": 1},
    ]
    assert snap["skipped"]["recent"][0]["offset"] == 9


def test_version_moves_on_every_change() -> None:
    agg = Aggregator()
    versions = [agg.version]
    agg.add_injection(row())
    versions.append(agg.version)
    agg.add_dead_letter(dead())
    versions.append(agg.version)
    agg.add_skipped(SkippedRow(T0, "t", 0, 0, "undecodable", ""))
    versions.append(agg.version)
    assert versions == sorted(set(versions)) and len(versions) == 4


def test_memory_stays_bounded_with_many_events_and_projects() -> None:
    agg = Aggregator(rows=20, latency_window=50, project_rows=5, project_latency_window=10, minutes=10, max_projects=8)
    for i in range(20_000):
        at = T0 + i * 0.5  # about 2.8 hours of events
        agg.add_injection(
            row(at, project=f"p{i % 40}", chars=0 if i % 7 == 0 else 100, reason="nothing_relevant_enough")
        )
        if i % 100 == 0:
            agg.add_dead_letter(dead(at, project=f"p{i % 40}"))
            agg.add_skipped(SkippedRow(at, "t", 0, i, "undecodable", "x"))
    stats = agg.all
    assert stats.injections == 20_000
    assert len(stats.recent) == 20 and len(stats.recent_empty) == 20 and len(stats.dead_letters) == 20
    assert all(len(window) <= 50 for window in stats.latency.values())
    assert len(stats.minutes) <= 11
    assert len(agg.recent_skipped) == 20
    assert len(agg.project_names) == 8 and agg.projects_dropped > 0
    snap = agg.snapshot(now=T0 + 10_000, rows=100)
    assert len(snap["recent"]) == 20 and len(snap["minutes"]) == 10
    assert len(json.dumps(snap)) < 60_000
