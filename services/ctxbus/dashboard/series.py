"""Bounded statistics for the dashboard: nearest-rank percentiles, latency histograms, per-minute buckets
and per-second counters. Each holds a fixed amount of state, whatever the number of events; the clock is
passed in.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
                    "e2e_p50": rounded(b.e2e.quantile(0.5)),
                    "e2e_p99": rounded(b.e2e.quantile(0.99)),
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


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
