"""The embedded store's cache of parsed items: bounded, least recently used out first, and never keeping what
was fetched before a write."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ctxbus.adapters.store_items import ItemCache, StoredItem, hits_of, unit_vector
from ctxbus.memory.model import MemoryItem


def item(item_id: str) -> MemoryItem:
    return MemoryItem.model_validate({"id": item_id, "project": "p", "kind": "pattern", "content": f"text {item_id}"})


def stored(item_id: str, vector: list[float] | None = None) -> StoredItem:
    return StoredItem(item(item_id), unit_vector(vector))


def test_a_bounded_cache_drops_the_least_recently_used() -> None:
    cache = ItemCache(2)
    assert cache.put({"a": stored("a"), "b": stored("b")}, cache.generation())
    assert set(cache.get(["a"])) == {"a"}  # a is now the most recent
    assert cache.put({"c": stored("c")}, cache.generation())
    assert set(cache.get(["a", "b", "c"])) == {"a", "c"}
    assert len(cache) == 2


def test_a_fetch_begun_before_a_write_is_not_kept() -> None:
    cache = ItemCache(10)
    before = cache.generation()
    cache.invalidate(["x"])  # a writer wrote x (or anything) meanwhile
    assert not cache.put({"x": stored("x")}, before)
    assert cache.get(["x"]) == {}
    assert cache.put({"x": stored("x")}, cache.generation())
    assert set(cache.get(["x"])) == {"x"}


def test_invalidate_forgets_the_written_points_or_everything() -> None:
    cache = ItemCache(10)
    cache.put({"a": stored("a"), "b": stored("b")}, cache.generation())
    cache.invalidate(["a", "never-cached"])
    assert set(cache.get(["a", "b"])) == {"b"}
    cache.invalidate()
    assert cache.get(["a", "b"]) == {} and len(cache) == 0


def test_size_zero_keeps_nothing_and_a_negative_size_is_refused() -> None:
    cache = ItemCache(0)
    assert not cache.put({"a": stored("a")}, cache.generation())
    assert cache.get(["a"]) == {}
    with pytest.raises(ValueError, match="0 or more"):
        ItemCache(-1)


def test_concurrent_writers_never_leave_a_stale_item() -> None:
    """Readers put what they fetched with the generation taken before; a writer bumps it after each write, so
    after the last write no reader's earlier fetch survives."""
    cache = ItemCache(100)
    version = {"x": 0}
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            generation = cache.generation()
            fetched = StoredItem(item(f"x-{version['x']}"), None)  # what the store held when fetched
            cache.put({"x": fetched}, generation)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(2_000):
        version["x"] += 1
        cache.invalidate(["x"])
    stop.set()
    for t in threads:
        t.join()
    kept = cache.get(["x"]).get("x")
    assert kept is None or kept.item.id == f"x-{version['x']}"


def test_hits_of_scores_keyword_only_hits_by_their_stored_vector() -> None:
    query = [1.0, 0.0, 0.0]
    rows = {
        "d": stored("d", [1.0, 0.0, 0.0]),
        "k": stored("k", [0.6, 0.8, 0.0]),  # cosine 0.6
        "n": stored("n", None),
    }
    dense, sparse = hits_of(query, [("d", 0.99), ("gone", 0.5)], [("k", 7.0), ("d", 2.0), ("n", 1.0)], rows)
    assert [(h.item.id, h.score) for h in dense] == [("d", 0.99)]  # a point deleted meanwhile is left out
    assert [(h.item.id, round(h.score, 6), h.extra["bm25"]) for h in sparse] == [
        ("k", 0.6, 7.0),
        ("d", 0.99, 2.0),  # the dense half's score
        ("n", 0.0, 1.0),  # no stored vector
    ]


def test_unit_vector() -> None:
    unit = unit_vector([3.0, 4.0])
    assert unit is not None and np.allclose(unit, [0.6, 0.8])
    assert unit_vector([0.0, 0.0]) is None and unit_vector(None) is None and unit_vector([]) is None
