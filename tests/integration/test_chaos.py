"""``ctxbus bench chaos``, short: the services as processes under load, each SIGKILLed once, the poison corpus
(1.1 MB and 10 MB records included) and a 2 s broker stall; nothing lost, nothing duplicated, every poison
record dead-lettered with its reason (issue 10)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_kills_poison_and_a_broker_stall_lose_nothing_and_duplicate_nothing() -> None:
    args = ["--requests", "300", "--rate", "6", "--kills", "3", "--stall-s", "2", "--memories", "50", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "chaos", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=840,
        preexec_fn=lifeline(),  # the benchmark, and through it its processes, die with the test
    )
    assert done.stdout.strip(), done.stderr[-4000:]
    result = json.loads(done.stdout)
    where = done.stderr[-4000:]
    assert (result["sent"], result["unsent"], result["lost"]) == (300, 0, 0), where
    assert (result["duplicated"], result["duplicate_completions"]) == (0, 0), where
    assert result["recorded"] == 300, where
    # the corpus on the request topic, the 1.1 MB and 10 MB records also on the injector's and the recorder's topic
    assert (result["poison_records"], result["poison_expected_dead_letters"]) == (23, 25), where
    assert result["poison_dead_lettered"] == 25 and result["poison_problems"] == [], where
    assert (result["wrong_dead_letters"], result["foreign_records"]) == (0, 0), where
    assert [k["service"] for k in result["kills"]] == ["recorder", "injector", "retriever"], where
    assert result["stall"]["seconds"] >= 2.0, where
    assert result["unexpected_exits"] == [] and set(result["stop_codes"].values()) == {0}, where
    assert result["ok"] and all(result["targets"].values()) and done.returncode == 0, where
