"""``ctxbus bench recycle``, short: a real ``ctxbus up`` recycles its broker between the second and third phase."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(240)
def test_the_three_phases_are_timed_and_the_broker_is_replaced() -> None:
    args = ["--memories", "20", "--fill", "30", "--idle-s", "1", "--probes", "4", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "recycle", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=230,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["broker_replaced"] is True and result["recycles"] >= 1
    assert result["fill_requests"] == 30 and result["probes"] == 4
    for phase in ("fresh_ms", "filled_ms", "recycled_ms"):
        figures = result[phase]
        assert 0 < figures["p50"] <= figures["max"] and figures["mean"] > 0
    assert result["not_ready_s"] is None or 0 < result["not_ready_s"] < 60


def test_nonsense_arguments_are_refused_clearly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "recycle", "--fill", "0"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--fill and --probes must be at least 1" in done.stderr
