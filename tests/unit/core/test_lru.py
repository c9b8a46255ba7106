"""The bounded least-recently-used map every ctxbus cache is built on."""

from __future__ import annotations

import pytest

from ctxbus.core.lru import Lru


def test_the_least_recently_used_goes_first_and_reading_counts_as_use() -> None:
    cache = Lru[str, int](2)
    cache.update({"a": 1, "b": 2})
    assert cache.get("a") == 1  # b is now the oldest
    cache.put("c", 3)
    assert cache.get_many(["a", "b", "c"]) == {"a": 1, "c": 3}
    assert len(cache) == 2 and "b" not in cache


def test_discarding_and_clearing() -> None:
    cache = Lru[tuple[str, str], int](10)
    cache.update({("s1", "x"): 1, ("s1", "y"): 2, ("s2", "x"): 3})
    assert cache.discard_where(lambda key: key[0] == "s1") == 2
    cache.discard([("s2", "x"), ("never", "there")])
    assert len(cache) == 0
    cache.put(("s3", "z"), 4)
    cache.clear()
    assert cache.get(("s3", "z")) is None


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused() -> None:
    cache = Lru[str, int](0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
    with pytest.raises(ValueError, match="0 or more"):
        Lru[str, int](-1)
