"""The parts of the capture corpus (``bench/data/capture/<part>/``): one list for the benchmark and its command line
(which reads it without importing the benchmark)."""

from __future__ import annotations

#: the parts judged against the done-when targets (no rule tuned on them before their one blind print)
JUDGED = tuple(f"heldout{n}" for n in ("", 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18))
PARTS = ("fit", *JUDGED)
