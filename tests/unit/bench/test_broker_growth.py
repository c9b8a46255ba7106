"""The broker benchmark's growth fit (pure)."""

from __future__ import annotations

import pytest

from ctxbus.bench.broker_growth import slope


def test_slope_is_ms_per_thousand_records() -> None:
    assert slope([(1000, 1.0), (2000, 1.8), (3000, 2.6)]) == pytest.approx(0.8)


def test_a_flat_series_has_no_growth() -> None:
    assert slope([(1000, 0.5), (2000, 0.5), (4000, 0.5)]) == pytest.approx(0.0)


def test_least_squares_through_noise() -> None:
    assert slope([(0, 0.0), (1000, 1.2), (2000, 1.8), (3000, 3.0)]) == pytest.approx(0.96)


@pytest.mark.parametrize("points", [[], [(1000, 1.0)], [(1000, 1.0), (1000, 2.0)]])
def test_too_few_distinct_points_are_refused(points: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError):
        slope(points)
