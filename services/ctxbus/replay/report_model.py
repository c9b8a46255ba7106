"""The replay report's shape: its statistics, counts, group and item rows, timeline, dead-letter samples
and sources, and ``Report.to_dict()``, its JSON form (built by ``ctxbus.replay.report``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (q in 0..100)."""
    if not ordered:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class Stats:
    count: int
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats:
        ordered = sorted(values)
        if not ordered:
            return cls(0)
        return cls(
            count=len(ordered),
            mean=math.fsum(ordered) / len(ordered),
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            p95=percentile(ordered, 95),
            p99=percentile(ordered, 99),
            min=ordered[0],
            max=ordered[-1],
        )


@dataclass(frozen=True, slots=True)
class Count:
    key: str
    count: int


@dataclass(frozen=True, slots=True)
class GroupRow:
    """Injections of one group (a fingerprint, profile, task type, agent or trigger) and their outcomes."""

    key: str
    chains: int
    injected: int
    empty: int
    successful: int
    partial: int
    failed: int
    unknown: int
    no_outcome: int

    @property
    def known(self) -> int:
        return self.successful + self.partial + self.failed

    @property
    def success_rate(self) -> float | None:
        return self.successful / self.known if self.known else None


@dataclass(frozen=True, slots=True)
class ItemRow:
    """One memory item: how often it was retrieved and injected, and the outcomes of the injections."""

    project: str
    item_id: str
    injected: int
    retrieved: int
    successful: int
    failed: int

    @property
    def injection_rate(self) -> float | None:
        """Injections per retrieval (below 1: the budget or the plan cut it)."""
        return self.injected / self.retrieved if self.retrieved else None


@dataclass(frozen=True, slots=True)
class TimeBucket:
    start: datetime
    requests: int
    injected: int
    empty: int
    dead_letters: int
    successful: int
    failed: int


@dataclass(frozen=True, slots=True)
class DeadLetterSample:
    reason: str
    error_class: str
    original_topic: str
    message: str
    count: int


@dataclass(frozen=True, slots=True)
class Source:
    """What was read (for the report's header)."""

    topics: tuple[str, ...]
    since: datetime | None = None
    until: datetime | None = None
    #: (topic, partition, first offset, end offset) read
    partitions: tuple[tuple[str, int, int, int], ...] = ()
    #: records inside the offsets but outside the time window
    out_of_window: int = 0
    #: topics asked for that the cluster does not have
    missing_topics: tuple[str, ...] = ()
    #: partitions given up short of their end (nothing came for a while): (topic, partition, position, end)
    incomplete: tuple[tuple[str, int, int, int], ...] = ()
    read_seconds: float = 0.0
    workers: int = 0


@dataclass
class Report:
    source: Source
    records: int
    decoded: int
    skipped: list[Count]
    skipped_by_topic: list[Count]
    events_by_topic: list[Count]
    schema_versions: list[Count]
    first_event: datetime | None
    last_event: datetime | None
    chains: dict[str, int]
    latency_ms: dict[str, Stats]
    sizes: dict[str, Stats]
    token_histogram: list[Count]
    empty_reasons: list[Count]
    truncated: int
    items_most: list[ItemRow]
    items_least: list[ItemRow]
    distinct_items: int
    outcomes: dict[str, int]
    outcome_links: dict[str, int]
    unmatched_outcomes: int
    success_by: dict[str, list[GroupRow]]
    dead_letters: int
    dead_letters_by: dict[str, list[Count]]
    dead_letter_samples: list[DeadLetterSample]
    timeline_step_s: int
    timeline: list[TimeBucket]
    duplicates: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Nothing was read at all (an empty window or empty topics)."""
        return self.records == 0

    @property
    def events_per_second(self) -> float | None:
        return self.records / self.source.read_seconds if self.source.read_seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": {
                "topics": list(self.source.topics),
                "since": _iso(self.source.since),
                "until": _iso(self.source.until),
                "partitions": [
                    {"topic": t, "partition": p, "start": s, "end": e} for t, p, s, e in self.source.partitions
                ],
                "out_of_window": self.source.out_of_window,
                "missing_topics": list(self.source.missing_topics),
                "incomplete": [
                    {"topic": t, "partition": p, "position": at, "end": e} for t, p, at, e in self.source.incomplete
                ],
                "read_seconds": round(self.source.read_seconds, 4),
                "events_per_second": round(self.events_per_second, 1) if self.events_per_second else None,
                "workers": self.source.workers,
            },
            "records": self.records,
            "decoded": self.decoded,
            "skipped": _counts(self.skipped),
            "skipped_by_topic": _counts(self.skipped_by_topic),
            "events_by_topic": _counts(self.events_by_topic),
            "schema_versions": _counts(self.schema_versions),
            "first_event": _iso(self.first_event),
            "last_event": _iso(self.last_event),
            "chains": dict(self.chains),
            "latency_ms": {k: asdict(v) for k, v in self.latency_ms.items()},
            "sizes": {k: asdict(v) for k, v in self.sizes.items()},
            "token_histogram": _counts(self.token_histogram),
            "empty_reasons": _counts(self.empty_reasons),
            "truncated": self.truncated,
            "items_most_injected": [_item(r) for r in self.items_most],
            "items_least_injected": [_item(r) for r in self.items_least],
            "distinct_items_injected": self.distinct_items,
            "outcomes": dict(self.outcomes),
            "outcome_links": dict(self.outcome_links),
            "unmatched_outcomes": self.unmatched_outcomes,
            "success_by": {k: [_group(r) for r in rows] for k, rows in self.success_by.items()},
            "dead_letters": {
                "total": self.dead_letters,
                **{k: _counts(v) for k, v in self.dead_letters_by.items()},
                "samples": [asdict(s) for s in self.dead_letter_samples],
            },
            "timeline": {
                "step_seconds": self.timeline_step_s,
                "buckets": [{**asdict(b), "start": _iso(b.start)} for b in self.timeline],
            },
            "duplicates": self.duplicates,
        }
        if self.extra:
            out["extra"] = self.extra
        return out


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _counts(rows: Iterable[Count]) -> dict[str, int]:
    return {r.key: r.count for r in rows}


def _item(row: ItemRow) -> dict[str, Any]:
    return {**asdict(row), "injection_rate": row.injection_rate}


def _group(row: GroupRow) -> dict[str, Any]:
    return {**asdict(row), "success_rate": row.success_rate}
