"""``ctxbus bench capture --stop-latency``, short: paired Stop hooks on a real ``ctxbus up``, capture on and off."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(240)
def test_each_round_times_a_stop_with_capture_on_and_one_with_it_off() -> None:
    args = ["bench", "capture", "--stop-latency", "--rounds", "3", "--gap-ms", "100", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=230,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout is the report's alone (no log line in it)
    assert result["rounds"] == 3 and result["gap_s"] == pytest.approx(0.1)
    assert result["invalid_output"] == 0  # every Stop printed valid hook output and exited 0
    for arm in ("capture_on_ms", "capture_off_ms"):
        assert 0 < result[arm]["p50"] <= result[arm]["max"]
    assert result["p50_ratio"] > 0 and len(result["paired_difference_ms"]["interval"]) == 2
