"""``ctxbus bench pipeline --soak``, short: one stack held at one rate, each window reported, then compared."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc"),
]


@pytest.mark.timeout(300)
def test_the_soak_reports_every_window_and_the_drift() -> None:
    args = ["--memories", "40", "--rate", "5", "--soak", "3", "--step-s", "2", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "pipeline", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=280,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    windows = result["windows"]
    assert [w["window"] for w in windows] == [1, 2, 3]
    assert [w["answered"] for w in windows] == [10, 10, 10] and result["lost"] == 0
    assert [w["answered_so_far"] for w in windows] == [10, 20, 30]
    for w in windows:
        assert 0 < w["end_to_end_ms"]["p50"] <= w["end_to_end_ms"]["p99"]
        assert {"stack", "broker", "client"} <= set(w["cpu_ms_per_request"])
    drift = result["drift"]
    assert drift["windows_compared"] == 1
    assert {"stack", "broker", "client"} <= set(drift["cpu_ms_per_request"])
    assert drift["end_to_end_p50_ms"]["first"] == round(windows[0]["end_to_end_ms"]["p50"], 2)


def test_soak_and_find_capacity_are_separate_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "pipeline", "--soak", "3", "--find-capacity"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "separate runs" in done.stderr and "Traceback" not in done.stderr
