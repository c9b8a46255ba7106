"""``ctxbus bench broker-kill``, short: a real ``ctxbus up`` heals its SIGKILLed broker under load; the figures
come out, no acknowledged request is lost and every one was answered."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxbus.adapters.lifeline import lifeline

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.timeout(400)
def test_one_kill_is_timed_and_nothing_in_the_history_goes_unanswered() -> None:
    args = ["--kills", "1", "--before-s", "4", "--between-s", "4", "--memories", "20", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "broker-kill", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=390,
        preexec_fn=lifeline(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    [kill] = result["kills"]
    assert 0 < kill["ready_s"] <= kill["first_answer_s"] and kill["log_bytes"] > 0
    # nothing acknowledged is lost: what the killed broker took along, the load's publisher sent again
    assert result["acked"] > 0 and result["lost"] == {} and result["unanswered"] == 0
    assert set(result["acked_by_phase"]) <= {"before", "after-1"}


def test_nonsense_arguments_are_refused_clearly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "bench", "broker-kill", "--kills", "0"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--kills 1 to 100" in done.stderr
