"""Pure, bounded aggregation of injection events, dead letters and skipped messages for the dashboard.

Nothing here grows with the number of events: recent rows are ring buffers (``rows``, kept in time order,
newest first on the page, whatever order the partitions are read in), latency
percentiles are taken over a fixed window of the latest samples, per-minute and per-second figures live
in a fixed number of buckets (``series``), and per-project state is kept for at most ``max_projects``
projects (least recently active dropped first). The clock is passed in; there is no Kafka and no I/O.
"""

from __future__ import annotations

import bisect
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from ctxbus.dashboard.inspections import DEFAULT_MAX_CHAINS, InspectionStore
from ctxbus.dashboard.rows import DeadLetterRow, InjectionRow, SkippedRow
from ctxbus.dashboard.series import MinuteSeries, SecondCounter, percentiles, rounded

#: Latency stages, in the order the page shows them.
#: end_to_end: the request's emitted_at -> the injection's emitted_at (what the asking agent waits);
#: retrieval / assembly: the work the retriever and the injector report in the event;
#: transit: end_to_end minus that work (queueing and broker hops);
#: delivery: the injection's emitted_at -> this dashboard consumed it (the dashboard's own lag).
STAGES = ("end_to_end", "retrieval", "assembly", "transit", "delivery")
#: Upper bounds of the injection size histogram, in characters (the last bucket is unbounded).
CHAR_BOUNDS = (0, 100, 500, 1_000, 2_000, 4_000, 6_000, 8_000, 10_000)


def keep_newest(ring: deque[Any], row: Any) -> None:
    """Put ``row`` in ``ring`` (bounded, oldest first) in time order (``row.at``; ties in arrival order): the feed
    reads partitions in turn, so rows come out of time order. A full ring keeps its newest rows; a row older than
    all of them is not kept."""
    if not ring or row.at >= ring[-1].at:
        ring.append(row)  # the usual case: the newest so far (a full ring drops its oldest)
        return
    if len(ring) == ring.maxlen:
        if row.at < ring[0].at:
            return
        ring.popleft()
    ring.insert(bisect.bisect_right(ring, row.at, key=lambda r: r.at), row)


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
        keep_newest(self.recent, row)
        if row.empty:
            self.empty += 1
            self.empty_reasons[row.empty_reason or "unspecified"] += 1
            keep_newest(self.recent_empty, row)
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
        keep_newest(self.dead_letters, row)
        bucket = self.minutes.bucket(row.at)
        if bucket is not None:
            bucket.dead_letters += 1

    def view(self, now: float, rows: int) -> dict[str, Any]:
        def latest(ring: Iterable[Any]) -> list[dict[str, Any]]:
            return [r.as_dict() for r in list(ring)[::-1][:rows]]

        stages = {}
        for stage in STAGES:
            samples = self.latency[stage]
            stats = {k: rounded(v) for k, v in percentiles(samples).items()}
            stages[stage] = {**stats, "max": rounded(max(samples)) if samples else None, "n": len(samples)}
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
        max_chains: int = DEFAULT_MAX_CHAINS,
    ) -> None:
        self.version = 0
        self.max_projects = max_projects
        self.projects_dropped = 0
        self._project_args = {"rows": project_rows, "latency_window": project_latency_window, "minutes": minutes}
        self.all = Stats(rows=rows, latency_window=latency_window, minutes=minutes)
        self._projects: OrderedDict[str, Stats] = OrderedDict()
        self.skipped: Counter[tuple[str, str]] = Counter()
        self.recent_skipped: deque[SkippedRow] = deque(maxlen=rows)
        #: recent chains a row of the page can open (the inspector)
        self.inspections = InspectionStore(max_chains)

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
        keep_newest(self.recent_skipped, row)
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
