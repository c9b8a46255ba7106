"""Pure, bounded aggregation of injection events, dead letters and skipped messages for the dashboard.

Nothing here grows with the number of events: recent rows are ring buffers, latency percentiles
are taken over a fixed window of the latest samples, per-minute and per-second figures live in a
fixed number of buckets, and per-project state is kept for at most ``max_projects`` projects
(least recently active dropped first). The clock is passed in; there is no Kafka and no I/O.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, DeadLetter

#: Latency stages, in the order the page shows them.
#: end_to_end: the request's emitted_at -> the injection's emitted_at (what the asking agent waits);
#: retrieval / assembly: the work the retriever and the injector report in the event;
#: transit: end_to_end minus that work (queueing and broker hops);
#: delivery: the injection's emitted_at -> this dashboard consumed it (the dashboard's own lag).
STAGES = ("end_to_end", "retrieval", "assembly", "transit", "delivery")
#: Percentiles reported for every stage.
QUANTILES = (50.0, 95.0, 99.0)
#: Upper bounds (ms) of the per-minute latency histograms; one more bucket holds what is above.
LATENCY_BOUNDS_MS = (
    1.0,
    2.0,
    3.0,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    30.0,
    50.0,
    75.0,
    100.0,
    150.0,
    200.0,
    300.0,
    500.0,
    750.0,
    1_000.0,
    1_500.0,
    2_000.0,
    3_000.0,
    5_000.0,
    7_500.0,
    10_000.0,
    30_000.0,
    60_000.0,
)
#: Upper bounds of the injection size histogram, in characters (the last bucket is unbounded).
CHAR_BOUNDS = (0, 100, 500, 1_000, 2_000, 4_000, 6_000, 8_000, 10_000)
#: Longest error message or detail kept in a row, in characters.
MAX_MESSAGE_CHARS = 300
_REASON_SLUG = re.compile(r"^([a-z][a-z0-9_]{1,40}): ")


# ---------------------------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class InjectionRow:
    """One context-injected event, reduced to what the page shows."""

    event_id: str
    correlation_id: str
    at: float  # the injection's emitted_at, epoch seconds
    received_at: float  # when the dashboard consumed it, epoch seconds
    project: str
    session: str
    agent: str
    trigger: str
    items: int
    chars: int
    size_bytes: int
    tokens: int
    truncated: bool
    empty_reason: str | None
    source: str
    e2e_ms: float | None
    retrieval_ms: float
    assembly_ms: float

    @property
    def empty(self) -> bool:
        """No context at all (a pre-context without memory items is not empty)."""
        return self.chars == 0

    def stage_ms(self) -> dict[str, float]:
        """Each latency stage this event measures (end-to-end and transit need the request's time)."""
        stages = {
            "retrieval": self.retrieval_ms,
            "assembly": self.assembly_ms,
            "delivery": max(0.0, (self.received_at - self.at) * 1000.0),
        }
        if self.e2e_ms is not None:
            stages["end_to_end"] = self.e2e_ms
            stages["transit"] = max(0.0, self.e2e_ms - self.retrieval_ms - self.assembly_ms)
        return stages

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.event_id,
            "correlation_id": self.correlation_id,
            "at": self.at,
            "project": self.project,
            "session": self.session,
            "agent": self.agent,
            "trigger": self.trigger,
            "items": self.items,
            "chars": self.chars,
            "bytes": self.size_bytes,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "empty_reason": self.empty_reason,
            "source": self.source,
            "e2e_ms": _round(self.e2e_ms),
            "retrieval_ms": _round(self.retrieval_ms),
            "assembly_ms": _round(self.assembly_ms),
        }


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    at: float  # failed_at, epoch seconds
    project: str | None  # from the original event, when it still decodes
    original_topic: str
    original_partition: int
    original_offset: int
    consumer_group: str
    reason: str
    error_class: str
    error_message: str
    attempts: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "project": self.project,
            "topic": self.original_topic,
            "partition": self.original_partition,
            "offset": self.original_offset,
            "group": self.consumer_group,
            "reason": self.reason,
            "error_class": self.error_class,
            "message": self.error_message,
            "attempts": self.attempts,
        }


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A message the dashboard could not decode (it is counted and shown, never fatal)."""

    at: float
    topic: str
    partition: int
    offset: int
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "reason": self.reason,
            "detail": self.detail,
        }


def injection_row(event: Envelope[ContextInjected], received_at: float) -> InjectionRow:
    p = event.payload
    e2e = None
    if p.request_emitted_at is not None:
        e2e = (event.emitted_at - p.request_emitted_at).total_seconds() * 1000.0
    return InjectionRow(
        event_id=str(event.event_id),
        correlation_id=str(event.correlation_id),
        at=event.emitted_at.timestamp(),
        received_at=received_at,
        project=event.project,
        session=event.session_id,
        agent=p.agent_name,
        trigger=p.trigger.value,
        items=len(p.item_ids),
        chars=p.context_chars,
        size_bytes=p.context_size_bytes,
        tokens=p.token_estimate,
        truncated=p.truncated,
        empty_reason=None if p.context else (p.empty_reason or "unspecified"),
        source=p.context_source.value,
        e2e_ms=e2e,
        retrieval_ms=float(p.retrieval_duration_ms),
        assembly_ms=float(p.assembly_duration_ms),
    )


def dead_letter_reason(record: DeadLetter) -> str:
    """The runner writes ``"<reason>: <error>"``; the slug when there is one, else the error class."""
    match = _REASON_SLUG.match(record.error_message)
    return match.group(1) if match else record.error_class


def dead_letter_row(record: DeadLetter, project: str | None) -> DeadLetterRow:
    return DeadLetterRow(
        at=record.failed_at.timestamp(),
        project=project,
        original_topic=record.original_topic,
        original_partition=record.original_partition,
        original_offset=record.original_offset,
        consumer_group=record.consumer_group,
        reason=dead_letter_reason(record),
        error_class=record.error_class,
        error_message=record.error_message[:MAX_MESSAGE_CHARS],
        attempts=record.attempts,
    )


# ---------------------------------------------------------------------------------------------- statistics


def percentiles(values: Iterable[float], quantiles: Sequence[float] = QUANTILES) -> dict[str, float | None]:
    """Nearest-rank percentiles (q in 0..100), one sort for all; None for no values."""
    ordered = sorted(values)
    result: dict[str, float | None] = {}
    for q in quantiles:
        if not ordered:
            result[f"p{q:g}"] = None
            continue
        rank = max(1, math.ceil(q / 100.0 * len(ordered)))
        result[f"p{q:g}"] = ordered[rank - 1]
    return result


class LatencyHistogram:
    """Counts over fixed bounds (``LATENCY_BOUNDS_MS`` + overflow): constant size, mergeable, quantiles
    estimated by linear interpolation inside the bucket (as Prometheus' histogram_quantile does)."""

    __slots__ = ("counts", "max", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        self.n = 0
        self.max = 0.0

    def add(self, value_ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BOUNDS_MS, value_ms)] += 1
        self.n += 1
        self.max = max(self.max, value_ms)

    def quantile(self, q: float) -> float | None:
        """q in 0..1; None when empty; the largest value seen when it falls in the overflow bucket."""
        if self.n == 0:
            return None
        rank = q * self.n
        cumulative = 0
        for i, count in enumerate(self.counts):
            if count and cumulative + count >= rank:
                if i == len(LATENCY_BOUNDS_MS):
                    return self.max
                lower = LATENCY_BOUNDS_MS[i - 1] if i else 0.0
                upper = LATENCY_BOUNDS_MS[i]
                estimate = lower + (upper - lower) * max(0.0, rank - cumulative) / count
                return min(estimate, self.max)
            cumulative += count
        return self.max


@dataclass(slots=True)
class MinuteBucket:
    injections: int = 0
    empty: int = 0
    dead_letters: int = 0
    items: int = 0
    chars: int = 0
    e2e: LatencyHistogram = field(default_factory=LatencyHistogram)


class MinuteSeries:
    """The last ``minutes`` minutes by event time; older buckets are dropped, so at most ``minutes`` + 1 live."""

    def __init__(self, minutes: int) -> None:
        self.minutes = minutes
        self._buckets: dict[int, MinuteBucket] = {}
        self._latest = -1

    def bucket(self, at: float) -> MinuteBucket | None:
        """The bucket of time ``at``, or None when it is older than the window."""
        key = int(at // 60) * 60
        if key <= self._latest - self.minutes * 60:
            return None
        found = self._buckets.get(key)
        if found is None:
            found = self._buckets[key] = MinuteBucket()
            if key > self._latest:
                self._latest = key
                floor = key - self.minutes * 60
                for old in [k for k in self._buckets if k <= floor]:
                    del self._buckets[old]
        return found

    def __len__(self) -> int:
        return len(self._buckets)

    def series(self, now: float) -> list[dict[str, Any]]:
        end = max(int(now // 60) * 60, self._latest)
        out = []
        for key in range(end - (self.minutes - 1) * 60, end + 60, 60):
            b = self._buckets.get(key) or MinuteBucket()
            out.append(
                {
                    "t": key,
                    "injections": b.injections,
                    "empty": b.empty,
                    "dead_letters": b.dead_letters,
                    "items": b.items,
                    "chars": b.chars,
                    "e2e_p50": _round(b.e2e.quantile(0.5)),
                    "e2e_p99": _round(b.e2e.quantile(0.99)),
                }
            )
        return out


class SecondCounter:
    """Events per second over the last ``seconds`` seconds by event time, in a fixed ring of slots."""

    def __init__(self, seconds: int = 60) -> None:
        self._size = seconds
        self._stamp = [-1] * seconds
        self._count = [0] * seconds

    def add(self, at: float) -> None:
        second = int(at)
        slot = second % self._size
        if self._stamp[slot] != second:
            if self._stamp[slot] > second:
                return  # older than the ring holds
            self._stamp[slot], self._count[slot] = second, 0
        self._count[slot] += 1

    def total(self, now: float) -> int:
        """Events in the window ``(now - seconds, now]``."""
        current = int(now)
        return sum(c for s, c in zip(self._stamp, self._count, strict=True) if current - self._size < s <= current)


class Stats:
    """Everything shown for one view (all projects, or one project); every part bounded."""

    def __init__(self, *, rows: int, latency_window: int, minutes: int) -> None:
        self.injections = 0
        self.empty = 0
        self.truncated = 0
        self.items = 0
        self.chars = 0
        self.tokens = 0
        self.dead_letter_count = 0
        self.last_at = 0.0
        self.triggers: Counter[str] = Counter()
        self.empty_reasons: Counter[str] = Counter()
        self.dead_reasons: Counter[str] = Counter()
        self.sizes = [0] * (len(CHAR_BOUNDS) + 1)
        self.recent: deque[InjectionRow] = deque(maxlen=rows)
        self.recent_empty: deque[InjectionRow] = deque(maxlen=rows)
        self.dead_letters: deque[DeadLetterRow] = deque(maxlen=rows)
        self.latency: dict[str, deque[float]] = {s: deque(maxlen=latency_window) for s in STAGES}
        self.minutes = MinuteSeries(minutes)
        self.per_second = SecondCounter(60)

    def add_injection(self, row: InjectionRow) -> None:
        self.injections += 1
        self.items += row.items
        self.chars += row.chars
        self.tokens += row.tokens
        self.truncated += row.truncated
        self.last_at = max(self.last_at, row.at)
        self.triggers[row.trigger] += 1
        self.sizes[bisect.bisect_left(CHAR_BOUNDS, row.chars)] += 1
        self.recent.append(row)
        if row.empty:
            self.empty += 1
            self.empty_reasons[row.empty_reason or "unspecified"] += 1
            self.recent_empty.append(row)
        for stage, value in row.stage_ms().items():
            self.latency[stage].append(value)
        self.per_second.add(row.at)
        bucket = self.minutes.bucket(row.at)
        if bucket is not None:
            bucket.injections += 1
            bucket.empty += row.empty
            bucket.items += row.items
            bucket.chars += row.chars
            if row.e2e_ms is not None:
                bucket.e2e.add(row.e2e_ms)

    def add_dead_letter(self, row: DeadLetterRow) -> None:
        self.dead_letter_count += 1
        self.dead_reasons[row.reason] += 1
        self.dead_letters.append(row)
        bucket = self.minutes.bucket(row.at)
        if bucket is not None:
            bucket.dead_letters += 1

    def view(self, now: float, rows: int) -> dict[str, Any]:
        def latest(ring: Iterable[Any]) -> list[dict[str, Any]]:
            return [r.as_dict() for r in list(ring)[::-1][:rows]]

        stages = {}
        for stage in STAGES:
            samples = self.latency[stage]
            stats = {k: _round(v) for k, v in percentiles(samples).items()}
            stages[stage] = {**stats, "max": _round(max(samples)) if samples else None, "n": len(samples)}
        return {
            "totals": {
                "injections": self.injections,
                "empty": self.empty,
                "truncated": self.truncated,
                "items": self.items,
                "chars": self.chars,
                "tokens": self.tokens,
                "dead_letters": self.dead_letter_count,
                "last_at": self.last_at or None,
            },
            "last_60s": self.per_second.total(now),
            "minutes": self.minutes.series(now),
            "latency": {"window": self.latency["retrieval"].maxlen, "stages": stages},
            "triggers": dict(self.triggers.most_common()),
            "empty_reasons": dict(self.empty_reasons.most_common()),
            "sizes": {"bounds": list(CHAR_BOUNDS), "counts": list(self.sizes)},
            "recent": latest(self.recent),
            "recent_empty": latest(self.recent_empty),
            "dead_letters": {"by_reason": dict(self.dead_reasons.most_common()), "recent": latest(self.dead_letters)},
        }


class Aggregator:
    """All views: every event goes to the global view and to its project's view (if the project is known).

    ``version`` moves on every change, so callers can cache a snapshot per (view, version).
    """

    def __init__(
        self,
        *,
        rows: int = 100,
        latency_window: int = 2_000,
        project_rows: int = 50,
        project_latency_window: int = 300,
        minutes: int = 60,
        max_projects: int = 200,
    ) -> None:
        self.version = 0
        self.max_projects = max_projects
        self.projects_dropped = 0
        self._project_args = {"rows": project_rows, "latency_window": project_latency_window, "minutes": minutes}
        self.all = Stats(rows=rows, latency_window=latency_window, minutes=minutes)
        self._projects: OrderedDict[str, Stats] = OrderedDict()
        self.skipped: Counter[tuple[str, str]] = Counter()
        self.recent_skipped: deque[SkippedRow] = deque(maxlen=rows)

    def _project(self, name: str) -> Stats:
        stats = self._projects.get(name)
        if stats is None:
            stats = self._projects[name] = Stats(**self._project_args)
            while len(self._projects) > self.max_projects:
                self._projects.popitem(last=False)
                self.projects_dropped += 1
        else:
            self._projects.move_to_end(name)
        return stats

    def add_injection(self, row: InjectionRow) -> None:
        self.all.add_injection(row)
        self._project(row.project).add_injection(row)
        self.version += 1

    def add_dead_letter(self, row: DeadLetterRow) -> None:
        self.all.add_dead_letter(row)
        if row.project is not None:
            self._project(row.project).add_dead_letter(row)
        self.version += 1

    def add_skipped(self, row: SkippedRow) -> None:
        self.skipped[(row.topic, row.reason)] += 1
        self.recent_skipped.append(row)
        self.version += 1

    @property
    def project_names(self) -> list[str]:
        return sorted(self._projects)

    def snapshot(self, *, now: float, project: str | None = None, rows: int = 50) -> dict[str, Any]:
        """What the page shows: the view's aggregates and its latest ``rows`` rows (JSON-ready)."""
        stats = (self._projects.get(project) or Stats(**self._project_args)) if project else self.all
        view = stats.view(now, rows)
        view["project"] = project or None
        view["version"] = self.version
        view["generated_at"] = now
        view["projects"] = [
            {"name": name, "injections": s.injections, "last_at": s.last_at or None}
            for name, s in sorted(self._projects.items())
        ]
        view["projects_dropped"] = self.projects_dropped
        view["skipped"] = {
            "total": sum(self.skipped.values()),
            "by_reason": [
                {"topic": topic, "reason": reason, "count": count}
                for (topic, reason), count in sorted(self.skipped.items())
            ],
            "recent": [r.as_dict() for r in list(self.recent_skipped)[::-1][:rows]],
        }
        return view


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
