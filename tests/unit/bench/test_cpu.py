"""The benchmark's CPU accounting: /proc stat lines read right, per-request and per-core figures."""

from __future__ import annotations

import os
import time

from ctxbus.bench.cpu import (
    TICKS_PER_S,
    CpuMeter,
    beyond_idle,
    core_share,
    cpu_seconds,
    per_request,
    process_cpu_s,
)


def test_cpu_seconds_reads_utime_and_stime_after_a_name_with_spaces_and_parens() -> None:
    fields = ["S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", str(3 * TICKS_PER_S), str(TICKS_PER_S)]
    line = "123 (tokio (worker) 1) " + " ".join(fields) + " 0 0 20 0"
    assert cpu_seconds(line) == 4.0


def test_own_process_cpu_grows_with_work() -> None:
    meter = CpuMeter({"me": os.getpid()}, threads_of="me")
    meter.start()
    until = time.monotonic() + 5.0
    while (process_cpu_s(os.getpid()) or 0.0) - meter._before["me"] < 0.05 and time.monotonic() < until:
        sum(range(100_000))
    meter.stop()
    assert meter.used_s["me"] > 0.0
    assert sum(meter.threads_used_s.values()) > 0.0


def test_per_request_totals_processes_but_not_their_threads_again() -> None:
    out = per_request({"stack": 2.0, "broker": 1.0}, 1000, parts={"stack main thread": 1.5})
    assert out == {"stack": 2.0, "broker": 1.0, "total": 3.0, "stack main thread": 1.5}
    assert per_request({"stack": 1.0}, 0) == {}


def test_core_share_is_percent_of_one_core() -> None:
    assert core_share({"broker": 0.5}, 2.0) == {"broker": 25.0}
    assert core_share({"broker": 0.5}, 0.0) == {}


def test_beyond_idle_takes_out_what_each_process_spends_idle_over_as_long() -> None:
    idle = CpuMeter({}, elapsed_s=2.0, used_s={"broker": 0.4, "stack": 0.2})
    busy = CpuMeter({}, elapsed_s=10.0, used_s={"broker": 3.0, "stack": 0.5, "client": 1.0})
    assert beyond_idle(busy, idle) == {"broker": 1.0, "stack": 0.0, "client": 1.0}
    assert beyond_idle(busy, CpuMeter({})) == {}
