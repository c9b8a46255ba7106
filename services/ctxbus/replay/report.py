"""The replay report: latencies, sizes, items, empty injections, outcomes by group, dead letters, a timeline.

Pure (no Kafka): built from the joined chains (``ctxbus.replay.join``) and the decoding counts
(``ctxbus.replay.decode``). ``Report.to_dict()`` is the JSON form; ``chain_rows`` is the one-row-per-
request table behind the CSV and Parquet outputs.

Percentiles are nearest-rank (the value at rank ceil(q/100 * n) of the sorted values), so every figure
is a value that was observed. A success rate is successful / (successful + partial + failed): chains
whose outcome is unknown or missing are counted but not in the rate.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.replay.decode import DeadLetterFact, DecodeStats
from ctxbus.replay.join import (
    KNOWN_OUTCOMES,
    STATUS_DEAD_LETTERED,
    STATUS_EMPTY,
    STATUS_INJECTED,
    STATUS_NOT_COMPLETED,
    STATUS_NOT_INJECTED,
    STATUSES,
    Chain,
    JoinResult,
)

#: Upper bounds of the token histogram (an injection of 0 tokens is its own bucket).
TOKEN_BUCKETS = (100, 250, 500, 1_000, 2_000, 4_000)
#: Timeline bucket sizes to choose from, in seconds; the smallest giving at most MAX_TIME_BUCKETS wins.
TIME_STEPS = (1, 5, 10, 30, 60, 300, 900, 1_800, 3_600, 3 * 3_600, 6 * 3_600, 86_400, 7 * 86_400)
MAX_TIME_BUCKETS = 48
#: How chains are grouped for success rates (the context fingerprint, the agent profile, the task type,
#: the asking agent, the trigger), in report order.
GROUPINGS = ("fingerprint", "profile", "task_type", "agent", "trigger")
LATENCIES = ("request_to_completed", "completed_to_injected", "end_to_end", "retrieval", "assembly")
SIZES = ("tokens", "chars", "bytes", "items")
MAX_MESSAGE_CHARS = 200


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


def _sorted_counts(counter: Counter[str]) -> list[Count]:
    return [Count(k, n) for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]


def from_us(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def token_bucket(tokens: int) -> str:
    if tokens <= 0:
        return "0"
    low = 1
    for high in TOKEN_BUCKETS:
        if tokens <= high:
            return f"{low}-{high}"
        low = high + 1
    return f">{TOKEN_BUCKETS[-1]}"


def token_bucket_labels() -> list[str]:
    labels = ["0"]
    low = 1
    for high in TOKEN_BUCKETS:
        labels.append(f"{low}-{high}")
        low = high + 1
    return [*labels, f">{TOKEN_BUCKETS[-1]}"]


def time_step(first_us: int, last_us: int) -> int:
    span_s = max(0.0, (last_us - first_us) / 1_000_000)
    for step in TIME_STEPS:
        if span_s / step < MAX_TIME_BUCKETS:
            return step
    return TIME_STEPS[-1]


#: GroupRow counters, by position
_G_CHAINS, _G_INJECTED, _G_EMPTY, _G_SUCCESSFUL, _G_PARTIAL, _G_FAILED, _G_UNKNOWN, _G_NONE = range(8)
_G_OUTCOME = {"successful": _G_SUCCESSFUL, "partial": _G_PARTIAL, "failed": _G_FAILED, "unknown": _G_UNKNOWN}


def _count(counters: dict[str, Counter[str]], project: str, items: Sequence[str], global_items: Sequence[str]) -> None:
    """Count ``items`` under their project: the event's, or the global scope for ``global_items``."""
    if not global_items:
        counters[project].update(items)
        return
    shared = set(global_items)
    counters[GLOBAL_PROJECT].update(i for i in items if i in shared)
    counters[project].update(i for i in items if i not in shared)


class _Tally:
    """Everything the report counts, in one pass over the chains (the report of a large replay is
    built from tens of thousands of chains: plain locals and C-level counters, no per-chain objects)."""

    def __init__(self) -> None:
        self.status: Counter[str] = Counter()
        self.complete = 0
        self.with_outcome = 0
        self.request_to_completed: list[float] = []
        self.completed_to_injected: list[float] = []
        self.end_to_end: list[float] = []
        self.retrieval: list[float] = []
        self.assembly: list[float] = []
        self.tokens: list[int] = []
        self.chars: list[int] = []
        self.bytes: list[int] = []
        self.items: list[int] = []
        self.truncated = 0
        self.empty_reasons: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.retrieved: dict[str, Counter[str]] = defaultdict(Counter)
        self.injected: dict[str, Counter[str]] = defaultdict(Counter)
        self.good: dict[str, Counter[str]] = defaultdict(Counter)
        self.bad: dict[str, Counter[str]] = defaultdict(Counter)
        self.groups: dict[str, dict[str, list[int]]] = {name: {} for name in GROUPINGS}
        #: (request time, status, outcome) per chain with a request time, for the timeline
        self.moments: list[tuple[int, str, str | None]] = []

    def add(self, chain: Chain) -> None:  # noqa: PLR0915  (one pass on purpose)
        req, done, inj, out = chain.requested, chain.completed, chain.injected, chain.outcome
        start = req.emitted_us if req else done.request_emitted_us if done else inj.request_emitted_us if inj else None
        if inj is not None:
            status = STATUS_INJECTED if inj.item_ids else STATUS_EMPTY
        elif chain.dead_letter is not None:
            status = STATUS_DEAD_LETTERED
        else:
            status = STATUS_NOT_INJECTED if done is not None else STATUS_NOT_COMPLETED
        self.status[status] += 1
        outcome = out.outcome if out is not None else None
        self.with_outcome += out is not None
        if start is not None:
            self.moments.append((start, status, outcome))
        if done is not None:
            self.retrieval.append(done.retrieval_ms)
            if start is not None:
                self.request_to_completed.append((done.emitted_us - start) / 1000.0)
            if done.item_ids:
                _count(self.retrieved, done.project, done.item_ids, done.global_item_ids)
        if inj is not None:
            self.complete += req is not None and done is not None
            if done is not None:
                self.completed_to_injected.append((inj.emitted_us - done.emitted_us) / 1000.0)
            if start is not None:
                self.end_to_end.append((inj.emitted_us - start) / 1000.0)
            self.assembly.append(inj.assembly_ms)
            self.tokens.append(inj.token_estimate)
            self.chars.append(inj.context_chars)
            self.bytes.append(inj.context_bytes)
            self.items.append(len(inj.item_ids))
            self.truncated += inj.truncated
            self.outcomes[outcome or "no_outcome"] += 1
            if inj.item_ids:
                _count(self.injected, inj.project, inj.item_ids, inj.global_item_ids)
                if outcome == "successful":
                    _count(self.good, inj.project, inj.item_ids, inj.global_item_ids)
                elif outcome == "failed":
                    _count(self.bad, inj.project, inj.item_ids, inj.global_item_ids)
            else:
                self.empty_reasons[inj.empty_reason or "unknown"] += 1
        fact = req or done or inj
        task_type = (done.task_type if done is not None else None) or (req.task_type if req is not None else None)
        keys = (
            done.fingerprint if done is not None else None,
            done.profile if done is not None else None,
            task_type or "unknown",
            fact.agent_name if fact is not None else None,
            fact.trigger if fact is not None else None,
        )
        slot = _G_OUTCOME.get(outcome, _G_NONE) if outcome is not None else _G_NONE
        for rows, key in zip(self.groups.values(), keys, strict=True):
            if key is None:
                continue
            row = rows.get(key)
            if row is None:
                row = rows[key] = [0] * 8
            row[_G_CHAINS] += 1
            if status == STATUS_INJECTED:
                row[_G_INJECTED] += 1
            elif status == STATUS_EMPTY:
                row[_G_EMPTY] += 1
            row[slot] += 1

    def group_rows(self) -> dict[str, list[GroupRow]]:
        out = {}
        for name, rows in self.groups.items():
            made = [GroupRow(key, *counts) for key, counts in rows.items()]
            made.sort(key=lambda r: (-r.chains, r.key))
            out[name] = made
        return out

    def item_rows(self, top: int) -> tuple[list[ItemRow], list[ItemRow], int]:
        rows = []
        distinct = 0
        for project in sorted(set(self.injected) | set(self.retrieved)):
            injected, retrieved = self.injected[project], self.retrieved[project]
            good, bad = self.good[project], self.bad[project]
            distinct += len(injected)
            for item in set(injected) | set(retrieved):
                rows.append(ItemRow(project, item, injected[item], retrieved[item], good[item], bad[item]))
        most = sorted((r for r in rows if r.injected), key=lambda r: (-r.injected, -r.retrieved, r.project, r.item_id))
        # the least injected: retrieved, but rarely made it into a context (the budget or the plan cut them)
        least = sorted(
            (r for r in rows if r.retrieved),
            key=lambda r: (r.injection_rate or 0.0, -r.retrieved, r.project, r.item_id),
        )
        return most[:top], least[:top], distinct

    def timeline(self, dead: Sequence[DeadLetterFact]) -> tuple[int, list[TimeBucket]]:
        times = [m[0] for m in self.moments]
        times.extend(d.timestamp_ms * 1000 for d in dead)
        if not times:
            return 0, []
        first, last = min(times), max(times)
        step = time_step(first, last)
        step_us = step * 1_000_000
        origin = first - first % step_us
        cells = [[0] * 6 for _ in range((last - origin) // step_us + 1)]
        for start, status, outcome in self.moments:
            cell = cells[(start - origin) // step_us]
            cell[0] += 1
            if status == STATUS_INJECTED:
                cell[1] += 1
            elif status == STATUS_EMPTY:
                cell[1] += 1
                cell[2] += 1
            if outcome == "successful":
                cell[4] += 1
            elif outcome == "failed":
                cell[5] += 1
        for d in dead:
            cells[(d.timestamp_ms * 1000 - origin) // step_us][3] += 1
        return step, [TimeBucket(from_us(origin + i * step_us), *cell) for i, cell in enumerate(cells)]


def _dead_letters(dead: Sequence[DeadLetterFact], top: int) -> tuple[dict[str, list[Count]], list[DeadLetterSample]]:
    by = {
        "by_reason": _sorted_counts(Counter(d.reason for d in dead)),
        "by_error_class": _sorted_counts(Counter(d.error_class for d in dead)),
        "by_original_topic": _sorted_counts(Counter(d.original_topic for d in dead)),
        "by_consumer_group": _sorted_counts(Counter(d.consumer_group for d in dead)),
    }
    samples: Counter[tuple[str, str, str, str]] = Counter(
        (d.reason, d.error_class, d.original_topic, d.error_message[:MAX_MESSAGE_CHARS]) for d in dead
    )
    rows = [
        DeadLetterSample(r, c, t, m, n)
        for (r, c, t, m), n in sorted(samples.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    ]
    return by, rows


def build_report(join: JoinResult, stats: DecodeStats, source: Source, *, top: int = 10) -> Report:
    tally = _Tally()
    for chain in join.chains:
        tally.add(chain)
    most, least, distinct = tally.item_rows(top)
    dead_by, dead_samples = _dead_letters(join.dead_letters, top)
    step, timeline = tally.timeline(join.dead_letters)
    starts = [m[0] for m in tally.moments]
    skipped_by_topic: Counter[str] = Counter()
    for (topic, _), n in stats.skipped.items():
        skipped_by_topic[topic] += n
    histogram = Counter(token_bucket(t) for t in tally.tokens)
    return Report(
        source=source,
        records=stats.records,
        decoded=stats.decoded,
        skipped=[Count(k, n) for k, n in stats.skipped_by_reason().items()],
        skipped_by_topic=_sorted_counts(skipped_by_topic),
        events_by_topic=[Count(t, stats.by_topic[t]) for t in source.topics if stats.by_topic[t]],
        schema_versions=[Count(f"{t} v{v}", n) for (t, v), n in sorted(stats.versions.items())],
        first_event=from_us(min(starts)) if starts else None,
        last_event=from_us(max(starts)) if starts else None,
        chains={
            "total": len(join.chains),
            **{s: tally.status[s] for s in STATUSES},
            "complete": tally.complete,
            "with_outcome": tally.with_outcome,
        },
        latency_ms={
            "request_to_completed": Stats.of(tally.request_to_completed),
            "completed_to_injected": Stats.of(tally.completed_to_injected),
            "end_to_end": Stats.of(tally.end_to_end),
            "retrieval": Stats.of(tally.retrieval),
            "assembly": Stats.of(tally.assembly),
        },
        sizes={
            "tokens": Stats.of(tally.tokens),
            "chars": Stats.of(tally.chars),
            "bytes": Stats.of(tally.bytes),
            "items": Stats.of(tally.items),
        },
        token_histogram=[Count(label, histogram[label]) for label in token_bucket_labels() if histogram[label]],
        empty_reasons=_sorted_counts(tally.empty_reasons),
        truncated=tally.truncated,
        items_most=most,
        items_least=least,
        distinct_items=distinct,
        outcomes={k: tally.outcomes[k] for k in (*KNOWN_OUTCOMES, "unknown", "no_outcome")},
        outcome_links=dict(join.outcome_links),
        unmatched_outcomes=join.unmatched_outcomes,
        success_by=tally.group_rows(),
        dead_letters=len(join.dead_letters),
        dead_letters_by=dead_by,
        dead_letter_samples=dead_samples,
        timeline_step_s=step,
        timeline=timeline,
        duplicates=join.duplicates,
    )


#: The chain table (CSV, Parquet): column -> type ("str", "int", "float", "bool", "time", "list").
CHAIN_COLUMNS: dict[str, str] = {
    "correlation_id": "str",
    "project": "str",
    "session_id": "str",
    "agent_name": "str",
    "agent_role": "str",
    "trigger": "str",
    "task_id": "str",
    "profile": "str",
    "task_type": "str",
    "fingerprint": "str",
    "status": "str",
    "requested_at": "time",
    "request_to_completed_ms": "float",
    "completed_to_injected_ms": "float",
    "end_to_end_ms": "float",
    "retrieval_ms": "float",
    "assembly_ms": "float",
    "candidates": "int",
    "items_retrieved": "int",
    "items_injected": "int",
    "token_estimate": "int",
    "context_chars": "int",
    "context_bytes": "int",
    "truncated": "bool",
    "empty_reason": "str",
    "outcome": "str",
    "outcome_via": "str",
    "dead_letter_reason": "str",
    "dead_letter_error_class": "str",
    "requested_schema_id": "int",
    "completed_schema_id": "int",
    "injected_schema_id": "int",
    "injected_item_ids": "list",
}


def chain_row(chain: Chain) -> dict[str, Any]:
    req, done, inj, dead = chain.requested, chain.completed, chain.injected, chain.dead_letter
    start = chain.request_us
    return {
        "correlation_id": chain.correlation_id,
        "project": chain.project,
        "session_id": chain.session_id,
        "agent_name": chain.agent_name,
        "agent_role": chain.agent_role,
        "trigger": chain.trigger,
        "task_id": chain.task_id,
        "profile": chain.profile,
        "task_type": chain.task_type,
        "fingerprint": chain.fingerprint,
        "status": chain.status,
        "requested_at": from_us(start) if start is not None else None,
        "request_to_completed_ms": chain.request_to_completed_ms,
        "completed_to_injected_ms": chain.completed_to_injected_ms,
        "end_to_end_ms": chain.end_to_end_ms,
        "retrieval_ms": done.retrieval_ms if done else None,
        "assembly_ms": inj.assembly_ms if inj else None,
        "candidates": done.candidates if done else None,
        "items_retrieved": len(done.item_ids) if done else None,
        "items_injected": len(inj.item_ids) if inj else None,
        "token_estimate": inj.token_estimate if inj else None,
        "context_chars": inj.context_chars if inj else None,
        "context_bytes": inj.context_bytes if inj else None,
        "truncated": inj.truncated if inj else None,
        "empty_reason": chain.empty_reason if chain.status == STATUS_EMPTY else None,
        "outcome": chain.outcome_value,
        "outcome_via": chain.outcome_via,
        "dead_letter_reason": dead.reason if dead else None,
        "dead_letter_error_class": dead.error_class if dead else None,
        "requested_schema_id": req.schema_id if req else None,
        "completed_schema_id": done.schema_id if done else None,
        "injected_schema_id": inj.schema_id if inj else None,
        "injected_item_ids": list(inj.item_ids) if inj else [],
    }


def chain_rows(chains: Iterable[Chain]) -> list[dict[str, Any]]:
    return [chain_row(c) for c in chains]
