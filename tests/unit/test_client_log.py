"""The Kafka client's own log lines while a broker is down: the first of each kind, then one per window with
the count held back (issue 27: one ``up`` wrote 3.5 MB of reconnect lines in a minute)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from ctxbus import client_log


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_the_first_of_a_kind_passes_and_the_rest_are_counted_until_the_window_ends() -> None:
    clock = Clock()
    limiter = client_log.FirstOfAKind(window_s=60.0, clock=clock)
    reconnect = "Unable connect to node with id %s: %s"
    passed = [limiter.filter(_record("aiokafka", reconnect, 1, f"attempt {i}")) for i in range(500)]
    assert passed == [True] + [False] * 499
    assert limiter.held_back() == 499
    # another kind (another logger, level or template) is let through on its own
    assert limiter.filter(_record("aiokafka.conn", reconnect, 1, "x"))
    assert limiter.filter(_record("aiokafka", reconnect, 1, "x", level=logging.WARNING))
    clock.now = 60.0
    again = _record("aiokafka", reconnect, 1, "still down")
    assert limiter.filter(again) and again.__dict__["held_back"] == 499
    assert limiter.held_back() == 0


@pytest.fixture
def restore_client_logger() -> Iterator[None]:
    logger = logging.getLogger(client_log.CLIENT_LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_install_writes_json_lines_for_every_client_logger_and_replaces_itself(restore_client_logger: None) -> None:
    out = io.StringIO()
    client_log.install(io.StringIO())
    client_log.install(out)  # configure_logging runs more than once in a process: one handler, the last
    for _ in range(100):
        logging.getLogger("aiokafka.consumer.group_coordinator").error("Marking the coordinator dead (node %s)", 1)
        logging.getLogger("aiokafka.conn").warning("Connection at %s closed", "127.0.0.1:9092")
    logging.getLogger("aiokafka").info("below the level")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["logger"], line["level"]) for line in lines] == [
        ("aiokafka.consumer.group_coordinator", "error"),
        ("aiokafka.conn", "warning"),
    ]
    assert lines[0]["event"] == "kafka_client" and lines[0]["message"] == "Marking the coordinator dead (node 1)"
