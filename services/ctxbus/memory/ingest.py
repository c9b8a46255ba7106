"""Adding memory items to a store: embed their text, upsert them, report what happened."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbus.memory.model import MemoryItem
from ctxbus.ports import Embedder, VectorStore


@dataclass(frozen=True, slots=True)
class IngestReport:
    upserted: int
    projects: tuple[str, ...]


def ingest(items: Sequence[MemoryItem], embedder: Embedder, store: VectorStore) -> IngestReport:
    """Embed and upsert ``items`` (same project and id: the new version replaces the old)."""
    latest: dict[tuple[str, str], MemoryItem] = {}
    for item in items:  # a later duplicate in one batch wins, as it would one by one
        latest[(item.project, item.id)] = item
    unique = list(latest.values())
    if not unique:
        return IngestReport(upserted=0, projects=())
    vectors = embedder.embed([item.embedding_text() for item in unique])
    store.upsert(unique, vectors)
    return IngestReport(upserted=len(unique), projects=tuple(sorted({i.project for i in unique})))
