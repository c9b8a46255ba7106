"""The Kafka client's own log lines, rate-limited: the first of a kind, then one summary per window.

aiokafka logs through the standard library (``aiokafka``, ``aiokafka.conn``, ``aiokafka.consumer.group_coordinator``,
``aiokafka.consumer.fetcher``, ...), and with the broker down every client logs each reconnect attempt: one ``up``
wrote 3.5 MB in a minute of them (issue 27). :class:`FirstOfAKind` lets the first record of each kind (logger,
level, message template: a reconnect to another node with another error is the same kind) through and counts
the rest; once ``window_s`` has passed since that kind was last let through, the next one goes through with the
count of those held back meanwhile. ``install`` puts one handler with the filter on the ``aiokafka`` logger
(which then does not propagate), writing JSON lines like the services' own.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

#: the root of the client's loggers
CLIENT_LOGGER = "aiokafka"
#: how long a kind of line stays held back after it was let through
WINDOW_S = 60.0

_Kind = tuple[str, int, str]


class FirstOfAKind(logging.Filter):
    """Lets the first record of each kind through, counts the rest; one more (with the count) per window."""

    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._last: dict[_Kind, float] = {}  # when each kind was last let through
        self._held: dict[_Kind, int] = {}  # held back since then

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.window_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        record.held_back = self._held.pop(kind, 0)
        record.window_s = self.window_s
        return True

    def held_back(self) -> int:
        """Records held back that no later line has reported yet."""
        return sum(self._held.values())


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "event": "kafka_client",
            "logger": record.name,
            "message": record.getMessage(),
            "level": record.levelname.lower(),
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
        }
        held = getattr(record, "held_back", 0)
        if held:
            line["held_back"] = held  # like this one, since the last let through
            line["window_s"] = getattr(record, "window_s", WINDOW_S)
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = repr(record.exc_info[1])  # the cause, not aiokafka's traceback
        return json.dumps(line)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler ``install`` put there, so a second ``install`` replaces it."""


def install(stream: TextIO, level: int = logging.WARNING, window_s: float = WINDOW_S) -> FirstOfAKind:
    """The client's log lines to ``stream`` as JSON lines, rate-limited; returns the filter (its counts)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    for old in [h for h in logger.handlers if isinstance(h, _Handler)]:
        logger.removeHandler(old)
    handler = _Handler(stream)
    handler.setLevel(level)
    handler.setFormatter(_JsonLines())
    limiter = FirstOfAKind(window_s)
    handler.addFilter(limiter)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return limiter
