"""Wall-clock checks that hold on a busy machine (docs/development.md: the CPU-hog check).

A test of a time budget derives its margin from the budget the code was given, never from a fixed few hundred ms:
the code keeps its budget by its own means (deadlines, a watchdog, margins of tens of ms), and the test allows
``LOAD_FACTOR`` times that budget plus what no budget inside the code covers, a fresh process's start-up, measured
in the same test on the same machine. What such a check catches is a budget not kept at all: waiting for a
pipeline that takes far longer, or for a peer that never answers. How fast is measured by the benchmarks.
"""

from __future__ import annotations

#: how far a budget may overrun, as seen from the test, on a machine whose cores are all busy
LOAD_FACTOR = 2.0
#: a hook's budget (the client's timeout, the gateway's cap) in tests that assert which answer comes back and from
#: where, not how fast: a busy machine keeps it (the budgets' own tests: test_hooks.py, test_deadlines.py)
ROOMY_HOOK_MS = 20_000


def assert_within(elapsed_s: float, budget_s: float, startup_s: float = 0.0, what: str = "") -> None:
    """``elapsed_s`` (what the test measured) kept ``budget_s`` (what the code was given), with the test's slack:
    ``LOAD_FACTOR`` × (budget + the process start-up measured in the same test, if any)."""
    limit = LOAD_FACTOR * (budget_s + startup_s)
    assert elapsed_s < limit, f"{what} took {elapsed_s:.2f} s: budget {budget_s:.2f} s, start-up {startup_s:.2f} s"
