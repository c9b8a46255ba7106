"""The pure parts of ``up``'s child processes: the readiness line, the child's command, the runtime file's
metrics ports, the benchmark's naming of the stack's children."""

from __future__ import annotations

import sys

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.up_child import _parser
from ctxbus.cli.up_processes import child_command, parse_ready, ready_line
from ctxbus.runtime import metrics_ports
from ctxbus.settings import KafkaSettings


def test_the_readiness_line_round_trips() -> None:
    assert parse_ready(ready_line(1234, 9465)) == (1234, 9465)
    assert ready_line(1, 2).endswith(b"\n")


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"\n",
        b"not json\n",
        b"[]\n",
        b'{"pid": 1}\n',
        b'{"pid": "1", "metrics_port": 2}\n',
        b'{"pid": true, "metrics_port": 2}\n',
    ],
)
def test_anything_else_is_not_a_readiness_line(line: bytes) -> None:
    assert parse_ready(line) is None


def test_the_child_gets_the_broker_up_chose_and_its_services() -> None:
    config = KafkaClientConfig(KafkaSettings(), "127.0.0.1:5555", embedded=True)
    command = child_command(("injector", "recorder"), config, 7)
    assert command[:3] == [sys.executable, "-m", "ctxbus.cli.up_child"]
    args = _parser().parse_args(command[3:])
    assert (args.broker, args.embedded, args.ready_fd, args.services) == (
        "127.0.0.1:5555",
        True,
        7,
        ["injector", "recorder"],
    )
    cluster = KafkaClientConfig(KafkaSettings(), "kafka:9092", embedded=False)
    assert not _parser().parse_args(child_command(("recorder",), cluster, 3)[3:]).embedded


def test_the_child_runs_only_services_that_may_leave_up() -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--broker", "b", "--ready-fd", "3", "retriever"])


def test_every_metrics_port_of_a_stack_from_its_runtime_file() -> None:
    assert metrics_ports({"metrics_port": 9464}) == [9464]  # one process, or a file of an older ctxbus
    runtime = {
        "metrics_port": 9464,
        "service_processes": [
            {"services": ["injector", "recorder"], "pid": 10, "metrics_port": 9465},
            {"services": ["x"], "pid": None, "metrics_port": None},  # restarting: not ready yet
        ],
    }
    assert metrics_ports(runtime) == [9464, 9465]
