"""The capacity sweep's stepping: grow while steps pass, bisect between the highest pass and the lowest failure,
stop within the precision; a step passes only with nothing unanswered, p99 within the limit, and keeping up."""

from __future__ import annotations

import math

import pytest

from ctxbus.bench.capacity import CapacitySearch, StepOutcome, outcome_of


def run(search: CapacitySearch, capacity: float) -> list[float]:
    """Steps against a stack that sustains exactly ``capacity`` requests a second."""
    tried = []
    while (rate := search.next_rate()) is not None:
        tried.append(rate)
        ok = rate <= capacity
        search.record(StepOutcome(rate, 10.0, 40.0 if ok else 900.0, 0 if ok else 5, rate if ok else rate / 2))
    return tried


@pytest.mark.parametrize("capacity", [7.0, 55.0, 190.0, 212.0, 1000.0])
def test_it_finds_the_capacity_within_the_precision(capacity: float) -> None:
    search = CapacitySearch(start=20.0, growth=1.5, precision=0.1)
    tried = run(search, capacity)
    best, failure = search.best, search.lowest_failure
    assert best is not None and best <= capacity
    assert failure is not None and failure > capacity
    assert failure - best <= 0.1 * best + 1  # rates are whole numbers above the first steps
    assert len(tried) == len(set(tried)) <= search.max_steps


def test_growth_then_bisection_order() -> None:
    assert run(CapacitySearch(start=20.0, growth=1.5, precision=0.1), 55.0) == [20.0, 30, 45, 68, 56, 50, 53]


def test_nothing_passes_down_to_the_floor() -> None:
    search = CapacitySearch(start=20.0, min_rate=1.0)
    assert run(search, 0.5) == [20.0, 10.0, 5.0, 2.5, 1.2]
    assert search.best is None


def test_bounded_by_steps_and_rate() -> None:
    assert len(run(CapacitySearch(max_steps=3), 1e9)) == 3
    assert run(CapacitySearch(start=100.0, growth=2.0, max_rate=400.0), 1e9) == [100.0, 200, 400]


def test_a_step_passes_only_answered_in_time_and_keeping_up() -> None:
    assert StepOutcome(100.0, 12.0, 250.0, 0, 99.0).passes()
    assert not StepOutcome(100.0, 12.0, 251.0, 0, 99.0).passes()  # p99 over the limit
    assert not StepOutcome(100.0, 12.0, 40.0, 1, 99.0).passes()  # one unanswered
    assert not StepOutcome(100.0, 12.0, 40.0, 0, 80.0).passes()  # answered, but fell behind
    assert not StepOutcome(100.0, math.nan, math.nan, 0, 0.0).passes()


def test_outcome_of_a_steps_figures() -> None:
    figures = {
        "rate_per_s": 50.0,
        "end_to_end_ms": {"p50": 14.0, "p95": 20.0, "p99": 31.0, "max": 40.0},
        "lost": 0,
        "throughput_per_s": 49.8,
    }
    assert outcome_of(figures) == StepOutcome(50.0, 14.0, 31.0, 0, 49.8)
