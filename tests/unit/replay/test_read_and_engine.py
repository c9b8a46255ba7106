"""The pure parts of reading: how ranges are split between worker processes, how broker answers are
read, and how many workers a replay gets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctxbus.replay.engine import MIN_RECORDS_FOR_WORKERS, default_workers
from ctxbus.replay.read import PartitionRange, ReadPlan, _found, split_ranges


def test_every_range_is_cut_into_contiguous_slices_covering_it_once() -> None:
    ranges = [PartitionRange("a", 0, 10, 110), PartitionRange("a", 1, 0, 3), PartitionRange("b", 0, 5, 5)]
    shares = split_ranges(ranges, 3)
    assert len(shares) == 3
    for r in ranges:
        pieces = sorted(
            (s.start, s.end) for share in shares for s in share if (s.topic, s.partition) == (r.topic, r.partition)
        )
        covered = [o for start, end in pieces for o in range(start, end)]
        assert covered == list(range(r.start, r.end))
    sizes = [sum(s.size for s in share) for share in shares]
    assert max(sizes) - min(sizes) <= 2  # balanced: each share reads about a third of every partition
    assert split_ranges(ranges, 1) == [tuple(r for r in ranges if r.size)]
    with pytest.raises(ValueError):
        split_ranges(ranges, 0)


def test_a_plan_counts_its_records() -> None:
    assert ReadPlan((PartitionRange("a", 0, 3, 10), PartitionRange("a", 1, 4, 4))).records == 7


def test_offsets_for_times_answers() -> None:
    assert _found(None) is None
    assert _found(SimpleNamespace(offset=12, timestamp=1_700_000_000_000)) == 12
    # the embedded broker answers "no record at or after that time" as offset 0 with timestamp -1
    assert _found(SimpleNamespace(offset=0, timestamp=-1)) is None
    assert _found(SimpleNamespace(offset=-1, timestamp=5)) is None


def test_workers_only_for_large_replays() -> None:
    assert default_workers(MIN_RECORDS_FOR_WORKERS - 1, cores=8) == 0
    assert default_workers(MIN_RECORDS_FOR_WORKERS, cores=2) == 2
    assert default_workers(1_000_000, cores=1) == 2
    assert default_workers(1_000_000, cores=64) == 4
