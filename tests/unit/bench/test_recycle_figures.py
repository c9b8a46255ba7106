"""``ctxbus bench recycle``'s figures of one phase (pure)."""

from __future__ import annotations

import pytest

from ctxbus.bench.recycle import figures


def test_a_phase_has_its_percentiles_and_mean() -> None:
    result = figures([10.0, 20.0, 30.0, 40.0, 1000.0])
    assert result == {"p50": 30.0, "p95": 1000.0, "p99": 1000.0, "max": 1000.0, "mean": 220.0}


def test_no_latencies_is_an_error_not_a_figure() -> None:
    with pytest.raises(ValueError, match="at least one"):
        figures([])
