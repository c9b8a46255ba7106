"""The fleet run's comparisons can fail: a member's value off by anything, an item missing, a retry whose
pre-context lacks an attempt or continues from the wrong one."""

from __future__ import annotations

from ctxbus.bench.fleet_load import Retry, attempt_files
from ctxbus.bench.fleet_state import disagreements, missing_attempts

TRUTH = {("p", "a"): (0.7, 0.6, 3), ("p", "b"): (0.5, None, 0)}


def test_members_equal_to_the_single_member_agree_and_any_difference_is_named() -> None:
    assert disagreements({"r0": dict(TRUTH), "r1": dict(TRUTH)}, TRUTH) == []
    off = {**TRUTH, ("p", "a"): (0.7000001, 0.6, 3)}
    short = {("p", "a"): TRUTH[("p", "a")]}
    found = disagreements({"r0": dict(TRUTH), "r1": off, "r2": short}, TRUTH)
    assert [f.split(":")[0] for f in found] == ["r1 a", "r2 b"]


def context(task: str, last: int, files: range) -> str:
    listed = ", ".join(attempt_files(task, n) for n in files)
    return f"--- RETRY CONTEXT ---\nAttempt #{last + 1} - Previous validation failures:\nAlready created: {listed}\n"


def test_a_retry_must_continue_from_its_last_attempt_and_list_every_file() -> None:
    retry = Retry("c1", "t", 2)
    assert missing_attempts([retry], {"c1": context("t", 2, range(1, 3))}) == []
    assert missing_attempts([retry], {"c1": context("t", 3, range(1, 4))}) == []  # a later attempt seen too: fine
    assert missing_attempts([retry], {"c1": context("t", 1, range(1, 2))})  # the second attempt not seen
    assert missing_attempts([retry], {"c1": context("t", 2, range(2, 3))})  # the first one's file missing
    assert missing_attempts([retry], {}) == ["t after attempt 2: no injection"]
