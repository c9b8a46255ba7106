"""How ``ctxbus up`` spreads its services over processes, and the restart budget of a child process."""

from __future__ import annotations

import pytest

from ctxbus.core.process_layout import MAX_PROCESSES, Layout, RestartBudget, auto_processes, process_name, split

ALL = ("retriever", "injector", "recorder")


def test_one_process_keeps_every_service_in_up() -> None:
    assert split(ALL, 1) == Layout(ALL, ())


def test_two_processes_move_the_injector_and_the_recorder_into_one_child() -> None:
    assert split(ALL, 2) == Layout(("retriever",), (("injector", "recorder"),))


def test_three_processes_give_each_movable_service_its_own_child() -> None:
    assert split(ALL, 3) == Layout(("retriever",), (("injector",), ("recorder",)))
    assert MAX_PROCESSES == 3


def test_more_processes_than_services_to_move_is_the_same_as_fewer() -> None:
    assert split(ALL, 7) == split(ALL, 3)
    assert split(("retriever", "recorder"), 3) == Layout(("retriever",), (("recorder",),))


def test_the_store_owner_never_leaves_up_and_no_services_means_no_children() -> None:
    assert split(("retriever",), 3) == Layout(("retriever",), ())
    assert split((), 2) == Layout((), ())
    for processes in (1, 2, 3):
        assert "retriever" in split(ALL, processes).in_up


def test_zero_processes_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        split(ALL, 0)


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 2), (8, 2)])
def test_the_default_is_a_second_process_when_there_is_a_second_core(cpus: int, expected: int) -> None:
    assert auto_processes(cpus) == expected


def test_a_child_is_named_by_its_services() -> None:
    assert process_name(("injector", "recorder")) == "injector+recorder"


def test_the_restart_budget_allows_its_limit_within_the_window_then_refuses() -> None:
    budget = RestartBudget(limit=3, window_s=300.0)
    assert [budget.allow(t) for t in (0.0, 10.0, 20.0)] == [True, True, True]
    assert budget.allow(30.0) is False
    assert budget.used == 3


def test_restarts_older_than_the_window_no_longer_count() -> None:
    budget = RestartBudget(limit=2, window_s=60.0)
    assert budget.allow(0.0) and budget.allow(30.0)
    assert not budget.allow(59.0)
    assert budget.allow(60.0)  # the first restart left the window
    assert not budget.allow(61.0)
    assert budget.allow(90.0)
