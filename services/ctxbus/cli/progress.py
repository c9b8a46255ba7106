"""A one-line progress display for long commands: on stderr, and only when it is a terminal (never in pipes,
logs or tests reading the output)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``progress(done, total)`` redraws ``label: done/total items (p%)`` at most every ``interval_s``."""

    def __init__(
        self,
        label: str,
        stream: TextIO | None = None,
        *,
        interval_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._label = label
        self._interval = interval_s
        self._clock = clock
        self._last: float | None = None
        self._width = 0
        self.enabled = self._stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if done < total and self._last is not None and now - self._last < self._interval:
            return
        self._last = now
        percent = 100 * done // total if total else 100
        line = f"{self._label}: {done}/{total} items ({percent}%)"
        self._stream.write("\r" + line.ljust(self._width))
        self._stream.flush()
        self._width = max(self._width, len(line))

    def close(self) -> None:
        """End the line (when anything was drawn), so what follows starts on its own."""
        if self.enabled and self._last is not None:
            self._stream.write("\n")
            self._stream.flush()
            self._last = None
