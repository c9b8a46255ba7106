"""The soak's comparison of its first and last windows (pure)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ctxbus.bench.soak import drift


def window(p50: float, p99: float, broker: float, stack: float = 5.0) -> dict[str, Any]:
    return {
        "end_to_end_ms": {"p50": p50, "p99": p99},
        "cpu_ms_per_request": {"stack": stack, "broker": broker, "stack main thread": 1.0},
    }


def test_first_and_last_windows_are_averaged_and_compared() -> None:
    rows = [window(20, 40, 8), window(22, 44, 10), window(30, 60, 14), window(40, 80, 18), window(42, 84, 22)]
    d = drift(rows)
    assert d["windows_compared"] == 2
    assert d["end_to_end_p50_ms"] == {"first": 21.0, "last": 41.0, "ratio": 1.95}
    assert d["end_to_end_p99_ms"]["last"] == 82.0
    assert d["cpu_ms_per_request"]["broker"] == {"first": 9.0, "last": 20.0, "ratio": 2.22}
    assert d["cpu_ms_per_request"]["stack"]["ratio"] == 1.0
    # the stack's threads are parts of the stack, not processes of their own
    assert set(d["cpu_ms_per_request"]) == {"broker", "stack"}


def test_few_windows_compare_one_with_one() -> None:
    d = drift([window(10, 20, 4), window(30, 60, 12)])
    assert d["windows_compared"] == 1
    assert d["cpu_ms_per_request"]["broker"]["ratio"] == 3.0


def test_a_window_without_answers_does_not_poison_the_mean() -> None:
    rows = [window(10, 20, 4), window(math.nan, math.nan, 4), window(12, 24, 6), window(14, 28, 8)]
    d = drift(rows)
    assert d["end_to_end_p50_ms"]["first"] == 10.0
    assert d["end_to_end_p50_ms"]["last"] == 13.0


def test_one_window_is_refused() -> None:
    with pytest.raises(ValueError, match="at least two windows"):
        drift([window(10, 20, 4)])
