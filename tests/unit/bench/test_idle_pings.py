"""``ctxbus bench idle --ping-every``: when the keep-warm requests of a silence go (not how fast anything is)."""

from __future__ import annotations

import pytest

from ctxbus.bench.idle import _silence, ping_offsets


def test_no_ping_leaves_the_silence_whole() -> None:
    assert ping_offsets(300.0, 0.0) == []


def test_pings_count_back_from_the_timed_request() -> None:
    assert ping_offsets(300.0, 15.0) == [15.0 + 15.0 * k for k in range(19)]
    # the last one is always ``every`` before the end, whatever the pause: the steady state of a keep-warm schedule
    assert ping_offsets(31.0, 15.0) == [1.0, 16.0]
    assert ping_offsets(60.0, 25.0) == [10.0, 35.0]


def test_a_pause_no_longer_than_the_period_has_no_ping() -> None:
    assert ping_offsets(10.0, 15.0) == []
    assert ping_offsets(15.0, 15.0) == []


@pytest.mark.parametrize(("pause", "every", "count"), [(0.3, 0.1, 2), (1.0, 0.3, 3), (0.0, 0.1, 0)])
def test_offsets_stay_inside_the_pause(pause: float, every: float, count: int) -> None:
    offsets = ping_offsets(pause, every)
    assert len(offsets) == count
    assert all(0.0 < o < pause for o in offsets)
    assert offsets == sorted(offsets)


def test_the_silence_sends_one_request_per_offset_and_keeps_their_times() -> None:
    sent: list[int] = []

    def call() -> tuple[float, bool]:
        sent.append(len(sent))
        return float(len(sent)), True

    assert _silence(0.05, 0.02, call) == [1.0, 2.0]
    assert sent == [0, 1]
