"""The memory items an embedded store holds, parsed once and kept with their dense vectors.

A Qdrant Edge shard has one owner (this process), so every write to it goes through the owning adapter,
which tells this cache which points it wrote. A search then asks the engine for point ids and scores only
and takes the items from here: converting a point's payload to Python and validating it as a
:class:`~ctxbus.memory.model.MemoryItem` cost more than the search itself (40 hits: about 1 ms each,
against 0.4 ms for the engine's query at 1,000 memories).

Coherence with concurrent writers (searches run in worker threads while learning writes feedback): a writer
calls :meth:`ItemCache.invalidate` after its write; a reader takes :meth:`ItemCache.generation` before it
fetches the points it missed and :meth:`ItemCache.put` refuses them if any write happened since, so an item
fetched before a write can never be kept after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxbus.core.lru import Lru
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchHit, Vector

Unit = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class StoredItem:
    """An item as stored, with its dense vector scaled to unit length (None: the point has none)."""

    item: MemoryItem
    unit: Unit | None


def unit_vector(vector: Sequence[float] | None) -> Unit | None:
    """``vector`` scaled to length 1 as float32 (None for a missing or zero vector)."""
    if not vector:
        return None
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None


class ItemCache:
    """At most ``size`` stored items by point id, least recently used dropped first; 0 keeps nothing."""

    def __init__(self, size: int) -> None:
        self._items = Lru[str, StoredItem](size)
        self._generation = 0
        #: a write's forgetting and a fetch's keeping are each one step: no put between a check and its keeping
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._items.size

    def __len__(self) -> int:
        return len(self._items)

    def generation(self) -> int:
        """A number that changes with every write (take it before fetching what :meth:`put` will keep)."""
        return self._generation

    def get(self, point_ids: Iterable[str]) -> dict[str, StoredItem]:
        """The cached ones among ``point_ids`` (each marked as recently used)."""
        return self._items.get_many(point_ids)

    def put(self, fetched: Mapping[str, StoredItem], generation: int) -> bool:
        """Keep ``fetched`` unless a write happened since ``generation`` was taken; whether they were kept."""
        if not self._items.size or not fetched:
            return False
        with self._lock:
            if generation != self._generation:
                return False
            self._items.update(fetched)
        return True

    def invalidate(self, point_ids: Iterable[str] | None = None) -> None:
        """Forget ``point_ids`` (None: everything) after a write to them; fetches begun before are refused."""
        with self._lock:
            self._generation += 1
            if point_ids is None:
                self._items.clear()
            else:
                self._items.discard(point_ids)


def hits_of(
    query: Vector,
    dense_rows: Sequence[tuple[str, float]],
    sparse_rows: Sequence[tuple[str, float]],
    stored: Mapping[str, StoredItem],
) -> tuple[list[SearchHit], list[SearchHit]]:
    """Both halves' hits from the engine's (point id, score) rows and the stored items: a keyword hit the dense
    half did not find gets its cosine from the stored unit vector (0 without one). A point no longer stored
    (deleted between the search and the fetch) is left out."""
    dense = [SearchHit(item=stored[pid].item, score=score) for pid, score in dense_rows if pid in stored]
    cosine = {pid: score for pid, score in dense_rows}
    missing = [pid for pid, _ in sparse_rows if pid not in cosine and pid in stored]
    units = [stored[pid].unit for pid in missing]
    present = [i for i, u in enumerate(units) if u is not None]
    if present:
        q = unit_vector(query)
        if q is not None:
            matrix = np.stack([units[i] for i in present])  # type: ignore[misc]
            for i, value in zip(present, (matrix @ q).tolist(), strict=True):
                cosine[missing[i]] = float(value)
    sparse = [
        SearchHit(item=stored[pid].item, score=cosine.get(pid, 0.0), extra={"bm25": bm25})
        for pid, bm25 in sparse_rows
        if pid in stored
    ]
    return dense, sparse
