"""``ctxbus bench broker``, short: round trips through a real embedded broker as its partitions fill."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline
from ctxbus.bench.broker_growth import SERIES

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc"),
]


@pytest.mark.timeout(120)
def test_every_series_fills_and_times_its_round_trips() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxbus.cli.main",
            "bench",
            "broker",
            "--rounds",
            "2",
            "--fill",
            "30",
            "--probes",
            "5",
            "--json",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=110,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [s["series"] for s in result["series"]] == [s.name for s in SERIES]
    for series in result["series"]:
        assert [r["records_sent"] for r in series["rounds"]] == [30, 60]
        for r in series["rounds"]:
            assert r["wall_ms_per_round_trip"] > 0
            assert r["broker_cpu_ms_per_round_trip"] >= 0
        assert isinstance(series["broker_ms_per_1000_records"], float)


def test_bad_arguments_are_one_clear_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "broker", "--rounds", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--rounds must be at least 2" in done.stderr
    assert "Traceback" not in done.stderr
