"""How often ``ctxbus up`` restarts a dead embedded broker, and how long it waits first (issue 27)."""

from __future__ import annotations

import pytest

from ctxbus.core.broker_restarts import BrokerRestarts


def test_three_restarts_back_off_and_a_fourth_within_the_window_is_refused() -> None:
    restarts = BrokerRestarts(limit=3, window_s=300.0, first_delay_s=0.5, max_delay_s=8.0)
    assert [restarts.next_delay(t) for t in (10.0, 20.0, 30.0)] == [0.5, 1.0, 2.0]
    assert restarts.next_delay(40.0) is None
    line = restarts.refusal("killed by SIGKILL")
    assert "died 4 times within 300 s" in line and "killed by SIGKILL" in line
    assert "CTXBUS_KAFKA_EMBEDDED_RESTART_LIMIT" in line


def test_restarts_older_than_the_window_no_longer_count() -> None:
    restarts = BrokerRestarts(limit=2, window_s=60.0)
    assert restarts.next_delay(0.0) is not None and restarts.next_delay(1.0) is not None
    assert restarts.next_delay(30.0) is None
    assert restarts.next_delay(60.5) == restarts.first_delay_s * 2  # the one at 1.0 still counts


def test_the_backoff_is_capped() -> None:
    restarts = BrokerRestarts(limit=10, window_s=1000.0, first_delay_s=1.0, max_delay_s=3.0)
    assert [restarts.next_delay(float(t)) for t in range(5)] == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_a_limit_of_zero_never_restarts() -> None:
    assert BrokerRestarts(limit=0).next_delay(0.0) is None


@pytest.mark.parametrize(
    "kwargs", [{"limit": -1}, {"window_s": 0.0}, {"first_delay_s": -1.0}, {"first_delay_s": 2.0, "max_delay_s": 1.0}]
)
def test_nonsense_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BrokerRestarts(**kwargs)  # type: ignore[arg-type]
