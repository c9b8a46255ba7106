"""The replay report: latencies, sizes, items, empty injections, outcomes by group, dead letters, a timeline.

Pure (no Kafka): built from the joined chains (``ctxbus.replay.join``) and the decoding counts
(``ctxbus.replay.decode``). ``Report.to_dict()`` is the JSON form; ``chain_rows`` is the one-row-per-
request table behind the CSV and Parquet outputs.

Percentiles are nearest-rank (the value at rank ceil(q/100 * n) of the sorted values), so every figure
is a value that was observed. A success rate is successful / (successful + partial + failed): chains
whose outcome is unknown or missing are counted but not in the rate.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.replay.chain_rows import from_us
from ctxbus.replay.facts import DeadLetterFact, DecodeStats
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
from ctxbus.replay.report_model import (
    Count,
    DeadLetterSample,
    GroupRow,
    ItemRow,
    Report,
    Source,
    Stats,
    TimeBucket,
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


def _sorted_counts(counter: Counter[str]) -> list[Count]:
    return [Count(k, n) for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]


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
