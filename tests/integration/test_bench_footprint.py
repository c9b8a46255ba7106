"""``ctxbus bench footprint``, short: the three services as processes over a small store, each one's memory
and CPU per request read from /proc (the capacity model's figures come from the full run)."""

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


@pytest.mark.timeout(600)
def test_footprint_measures_each_service_process() -> None:
    args = ["--memories", "50", "--requests", "40", "--rate", "5", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "footprint", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=560,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["sent"], result["answered"], result["memories"]) == (40, 40, 50)
    services = result["services"]
    assert set(services) == {"retriever", "injector", "recorder"}
    for name, figures in services.items():
        assert 20 < figures["rss_idle_mib"] <= figures["peak_rss_mib"], name
        assert figures["idle_cores"] >= 0, name
    # the retriever holds the model and the store, and embeds and searches: it costs the most
    assert services["retriever"]["rss_idle_mib"] > services["injector"]["rss_idle_mib"]
    assert services["retriever"]["cpu_ms_per_request"] > 0
    assert result["store_disk_mib"] > 0 and result["cores"] >= 1
