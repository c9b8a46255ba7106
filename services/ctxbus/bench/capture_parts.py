"""The parts of the capture corpus (``bench/data/capture/<part>/``): one list for the benchmark and its command line
(which reads it without importing the benchmark)."""

from __future__ import annotations

PARTS = ("fit", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7", "heldout8")
#: the parts judged against the done-when targets (no rule tuned on them before their one blind print)
JUDGED = ("heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7", "heldout8")
