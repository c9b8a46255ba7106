"""A bounded map that forgets the least recently used entry first: the one such cache the caches of ctxbus
(query vectors, stored items, session classifications) are built on."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most ``size`` entries (0: keeps nothing); reading one makes it the most recently used. Thread-safe."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"a cache's size must be 0 or more, not {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The present ones among ``keys``."""
        found: dict[K, V] = {}
        with self._lock:
            for key in keys:
                value = self._entries.get(key)
                if value is not None:
                    self._entries.move_to_end(key)
                    found[key] = value
        return found

    def put(self, key: K, value: V) -> None:
        self.update({key: value})

    def update(self, entries: Mapping[K, V]) -> None:
        if not self.size:
            return
        with self._lock:
            for key, value in entries.items():
                self._entries[key] = value
                self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def discard(self, keys: Iterable[K]) -> None:
        with self._lock:
            for key in keys:
                self._entries.pop(key, None)

    def discard_where(self, drop: Callable[[K], bool]) -> int:
        """Forget every entry whose key ``drop`` picks; how many."""
        with self._lock:
            keys = [key for key in self._entries if drop(key)]
            for key in keys:
                del self._entries[key]
        return len(keys)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
