"""The arithmetic of ``ctxbus bench idle``'s figures beside each first request after a silence (not its speed)."""

from __future__ import annotations

import os

import pytest

from ctxbus.bench.idle_probe import (
    Call,
    ChainTimes,
    Controls,
    case_of,
    fault_delta,
    hops,
    major_faults,
    pause_row,
    stage_delta,
)
from ctxbus.cli.errors import CliError
from ctxbus.cli.idle_cmds import parse_pauses


def test_case_of_reads_the_benchmark_number_at_the_end() -> None:
    assert case_of("how do I run the tests (case 12)") == 12
    assert case_of("how do I run the tests (case 3)  ") == 3
    assert case_of("(case 4) is not at the end") is None
    assert case_of("no number") is None


def test_hops_split_a_call_at_its_records() -> None:
    call = Call(case=7, sent_at=100.000, received_at=100.250)
    chain = ChainTimes(requested={7: 100.010}, completed={7: 100.150}, injected={7: 100.200})
    assert hops(call, chain) == {"gateway_in": 10.0, "retriever": 140.0, "injector": 50.0, "gateway_out": 50.0}
    chain.retrieval_ms[7] = 95.04
    assert hops(call, chain) == {
        "gateway_in": 10.0,
        "retriever": 140.0,
        "injector": 50.0,
        "gateway_out": 50.0,
        "retrieval_work": 95.0,
    }


def test_hops_of_a_call_whose_chain_is_incomplete_are_unknown() -> None:
    call = Call(case=7, sent_at=100.0, received_at=100.2)
    assert hops(call, ChainTimes(requested={7: 100.01}, completed={7: 100.1})) is None
    assert hops(call, ChainTimes(requested={8: 1.0}, completed={8: 1.0}, injected={8: 1.0})) is None


def test_pause_row_sets_each_control_against_its_warm_value() -> None:
    row = pause_row(300.0, 150.0, 60.0, {"embed_ms": 30.0, "loopback_ms": 0.2}, {"embed_ms": 20.0, "loopback_ms": 0.1})
    assert row["pause_s"] == 300.0
    assert row["vs_warm_p50"] == 2.5
    assert row["control_vs_warm"] == {"embed_ms": 1.5, "loopback_ms": 2.0}
    # the embed lost 10 ms to the machine after the silence: 140 ms against 60
    assert row["net_vs_warm_p50"] == round(140.0 / 60.0, 2)


def test_pause_row_without_warm_figures_gives_no_ratios() -> None:
    row = pause_row(10.0, 80.0, 0.0, {"loopback_ms": 0.3}, {})
    assert row["vs_warm_p50"] is None and row["net_vs_warm_p50"] is None
    assert row["control_vs_warm"] == {}


def test_a_control_faster_after_the_silence_does_not_lower_the_net_figure() -> None:
    row = pause_row(60.0, 90.0, 60.0, {"embed_ms": 10.0}, {"embed_ms": 20.0})
    assert row["net_vs_warm_p50"] == 1.5


def test_repeated_pauses_are_kept_in_order() -> None:
    assert parse_pauses("300,300,300") == (300.0, 300.0, 300.0)
    assert parse_pauses("10, 60,300") == (10.0, 60.0, 300.0)
    with pytest.raises(CliError):
        parse_pauses("10,-1")


def test_the_loopback_and_memory_controls_answer_without_an_embedder() -> None:
    controls = Controls(None)
    try:
        first, second = controls.measure(), controls.measure()
    finally:
        controls.close()
    assert set(first) == set(second) == {"loopback_ms", "memory_ms"}
    assert first["loopback_ms"] >= 0.0 and first["memory_ms"] >= 0.0


def test_major_faults_are_read_from_proc_and_differenced() -> None:
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc")
    counts = major_faults({"me": os.getpid(), "gone": 2**22 + 7})
    assert counts["me"] >= 0 and counts["gone"] == 0
    assert fault_delta({"a": 3, "b": 1}, {"a": 5}) == {"a": 2, "b": 0}


def test_stage_delta_gives_each_stage_and_service_time_between_two_reads() -> None:
    gw, emb = (("service", "gateway"), ("stage", "admit")), (("service", "retriever"), ("stage", "embed"))
    before = {
        "ctxbus_stage_seconds_sum": {gw: 0.010, emb: 0.200},
        "ctxbus_processing_seconds_sum": {(("service", "retriever"),): 1.0},
    }
    after = {
        "ctxbus_stage_seconds_sum": {gw: 0.0125, emb: 0.200, (("service", "injector"), ("stage", "assemble")): 0.003},
        "ctxbus_processing_seconds_sum": {(("service", "retriever"),): 1.020},
        "ctxbus_other_sum": {(("service", "retriever"),): 5.0},
    }
    # the embed did not move (its query was embedded ahead), a stage first seen counts from zero
    assert stage_delta(before, after) == {
        "gateway.admit": 2.5,
        "injector.assemble": 3.0,
        "retriever.processing": 20.0,
    }
    assert stage_delta(after, after) == {}
