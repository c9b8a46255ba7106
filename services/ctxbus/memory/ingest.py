"""Adding memory items to a store without losing any of them and without letting copies pile up.

For each incoming item, in order:

1. same project and id as a stored item (or an earlier item of the batch): the new version **replaces** it,
   keeping what outcomes taught about it;
2. else an *exact* duplicate (same project and kind, same normalised text: ``content_hash``) of an active item,
   other than one it supersedes: that item is updated instead of a second copy being added (**merged**: it keeps
   its id, creation time and cluster; it takes the newer wording, the higher confidence and importance, the
   union of domains and tags);
3. else it is **added**.

Near duplicates are never merged: that would make one of two memories unretrievable because it looks like the
other. An added item, or a replaced one whose text changed, joins the *cluster* of its nearest near duplicate
(same project and kind, cosine of the embedded texts at least ``near_duplicate``, the same numbers with their
units and no opposite sides: :mod:`ctxbus.memory.near_copies`) when it is also a near copy of the item that
founded that cluster (no chains), else it is its own cluster (cluster id = its id). Every item stays searchable;
the retriever collapses a cluster into its best member only where copies cost something, in an injected context
(:mod:`ctxbus.core.collapse`). An item stored before clusters existed has no cluster id and is its own cluster:
nothing to migrate.

An item that names ids in ``supersedes`` marks those items of its project ``superseded_by`` it: they stay stored
(history), searches no longer return them. The report says what happened to every item. Replaying the same input
gives the same store (ids, merges and clusters are deterministic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from ctxbus.memory.consolidate import consolidated, is_repeat, merged_files, repeat_confidence
from ctxbus.memory.model import MemoryItem
from ctxbus.memory.near_copies import DEFAULT_NEAR_DUPLICATE, near_duplicates
from ctxbus.ports import Embedder, SearchMode, SearchQuery, Vector, VectorStore
from ctxbus.redact.default import redact_text

#: the text fields of an item that may hold what a person wrote
TEXT_FIELDS = ("title", "content", "source", "example_reference", "key_insight", "lesson_learned", "mitigation")


def redact_item(item: MemoryItem) -> MemoryItem:
    """``item`` with secrets and ``<private>`` spans out of its text fields and tags (the same item when none)."""
    update: dict[str, object] = {}
    for name in TEXT_FIELDS:
        value = getattr(item, name)
        if isinstance(value, str) and value:
            cleaned = redact_text(value)
            if cleaned != value:
                update[name] = cleaned
    tags = tuple(redact_text(t) for t in item.tags)
    if tags != item.tags:
        update["tags"] = tags
    return item.model_copy(update=update) if update else item


#: stored neighbours looked at when placing an item in a cluster
CLUSTER_NEIGHBOURS = 10
#: items embedded at a time (progress is reported after each)
EMBED_CHUNK = 64

Progress = Callable[[int, int], None]


class Action(StrEnum):
    """What ingestion did with an incoming item (the wire's ``MemoryAction`` without ``rejected``)."""

    ADDED = "added"
    REPLACED = "replaced"
    MERGED = "merged"


@dataclass(frozen=True, slots=True)
class ItemResult:
    """What happened to one incoming item."""

    id: str
    project: str
    action: Action
    #: the cluster the item is in (merged: the cluster of the item it was merged into)
    cluster_id: str
    #: merged: the existing item it was merged into
    into: str | None = None
    #: the near duplicate whose cluster it joined, and their cosine (None: it is its own cluster)
    near: str | None = None
    similarity: float | None = None

    @property
    def clustered(self) -> bool:
        """Written as its own item into another item's cluster (a near copy, kept)."""
        return self.action is not Action.MERGED and self.cluster_id != self.id


@dataclass(frozen=True, slots=True)
class IngestReport:
    #: one result per incoming item, in input order
    results: tuple[ItemResult, ...]
    projects: tuple[str, ...]
    #: (project, id) of items newly marked superseded
    superseded: tuple[tuple[str, str], ...] = ()
    #: ids named in ``supersedes`` that were not found, as (project, id)
    supersede_missing: tuple[tuple[str, str], ...] = field(default=())

    def count(self, action: Action) -> int:
        return sum(1 for r in self.results if r.action is action)

    @property
    def upserted(self) -> int:
        """Incoming items written as themselves (added, or replacing their own earlier version)."""
        return self.count(Action.ADDED) + self.count(Action.REPLACED)

    @property
    def merged(self) -> tuple[ItemResult, ...]:
        """Incoming items that updated an exact duplicate instead of adding a copy."""
        return tuple(r for r in self.results if r.action is Action.MERGED)

    @property
    def clustered(self) -> int:
        """Incoming items kept as their own item in another item's cluster."""
        return sum(1 for r in self.results if r.clustered)


def merged_item(existing: MemoryItem, incoming: MemoryItem) -> MemoryItem:
    """``existing`` updated by an exact duplicate ``incoming``: newer wording, stronger scores, all labels; a
    captured lesson captured again in another session counts one more occurrence (:mod:`ctxbus.memory.consolidate`)."""
    repeat = is_repeat(existing, incoming)
    return existing.model_copy(
        update={
            "title": incoming.title or existing.title,
            "content": incoming.content,
            "domains": tuple(dict.fromkeys((*existing.domains, *incoming.domains))),
            "tags": tuple(dict.fromkeys((*existing.tags, *incoming.tags))),
            "confidence": repeat_confidence(existing, incoming)
            if repeat
            else max(existing.confidence, incoming.confidence),
            "importance": max(existing.importance, incoming.importance),
            "usage_count": max(existing.usage_count, incoming.usage_count),
            "success_rate": incoming.success_rate if incoming.success_rate is not None else existing.success_rate,
            "example_reference": incoming.example_reference or existing.example_reference,
            "outcome": incoming.outcome or existing.outcome,
            "key_insight": incoming.key_insight or existing.key_insight,
            "lesson_learned": incoming.lesson_learned or existing.lesson_learned,
            "severity": incoming.severity or existing.severity,
            "mitigation": incoming.mitigation or existing.mitigation,
            "supersedes": tuple(dict.fromkeys((*existing.supersedes, *incoming.supersedes))),
            "updated_at": max(existing.updated_at, incoming.updated_at),
            "occurrences": existing.occurrences + incoming.occurrences if repeat else existing.occurrences,
            "files": merged_files(existing.files, incoming.files),
            "provenance": existing.provenance or incoming.provenance,
            "stale": incoming.stale,
            "stale_since": incoming.stale_since,
        }
    )


Key = tuple[str, str]
#: a candidate neighbour: its cosine and the item
Neighbour = tuple[float, MemoryItem]


class _Batch:
    """What this ingest will write, by (project, id), with vectors; later writes win."""

    def __init__(self) -> None:
        self.items: dict[Key, MemoryItem] = {}
        self.vectors: dict[Key, Vector] = {}

    def put(self, item: MemoryItem, vector: Vector) -> None:
        self.items[(item.project, item.id)] = item
        self.vectors[(item.project, item.id)] = vector

    def peers(self, item: MemoryItem) -> list[MemoryItem]:
        """Active items of the batch an item may duplicate: same project and kind, another id, not superseded by it."""
        return [
            o
            for o in self.items.values()
            if o.project == item.project
            and o.kind is item.kind
            and o.id != item.id
            and o.active
            and o.id not in item.supersedes
        ]

    def exact_duplicate(self, item: MemoryItem) -> MemoryItem | None:
        return next((o for o in self.peers(item) if o.content_hash == item.content_hash), None)

    def neighbours(self, item: MemoryItem, vector: Vector) -> list[Neighbour]:
        peers = self.peers(item)
        if not peers:
            return []
        matrix = np.asarray([self.vectors[(p.project, p.id)] for p in peers], dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        sims = (matrix @ query) / np.where(norms > 0, norms, 1.0)
        return [(float(s), p) for s, p in zip(sims.tolist(), peers, strict=True)]


def _stored_peers(
    item: MemoryItem, vector: Vector, store: VectorStore, content_hash: str | None = None
) -> list[Neighbour]:
    """Active stored items of the item's project and kind nearest to ``vector`` (other ids, not superseded by it;
    with ``content_hash``: only those with that text)."""
    hits = store.search(
        SearchQuery(
            vector=vector,
            project=item.project,
            include_global=False,
            kinds=[item.kind],
            mode=SearchMode.DENSE,
            limit=CLUSTER_NEIGHBOURS,
            content_hash=content_hash,
        )
    )
    return [(h.score, h.item) for h in hits if h.item.id != item.id and h.item.id not in item.supersedes]


class _Ingest:
    """One ingest run: the batch, the store, the threshold."""

    def __init__(self, embedder: Embedder, store: VectorStore, threshold: float | None) -> None:
        self.embedder = embedder
        self.store = store
        self.threshold = threshold
        self.batch = _Batch()

    def current(self, found: MemoryItem) -> MemoryItem:
        """The batch's version of a stored item, when this ingest already rewrote it."""
        return self.batch.items.get((found.project, found.id), found)

    def exact_duplicate(self, item: MemoryItem, vector: Vector) -> MemoryItem | None:
        found = self.batch.exact_duplicate(item)
        if found is not None:
            return found
        for _, stored in _stored_peers(item, vector, self.store, content_hash=item.content_hash):
            candidate = self.current(stored)  # the batch may have changed its text or retired it since
            if candidate.active and candidate.content_hash == item.content_hash:
                return candidate
        return None

    def nearest(self, item: MemoryItem, vector: Vector) -> Neighbour | None:
        """The most similar near duplicate of ``item`` (batch or store), ties broken by id; None if none."""
        if self.threshold is None:
            return None
        candidates = self.batch.neighbours(item, vector)
        in_batch = {(o.project, o.id) for _, o in candidates}
        candidates += [
            (sim, stored)
            for sim, stored in _stored_peers(item, vector, self.store)
            if (stored.project, stored.id) not in in_batch
        ]
        near = [(s, o) for s, o in candidates if near_duplicates(item.content, o.content, s, self.threshold)]
        # no chains: an item joins a cluster only when it is a near copy of the item that founded it (so a cluster
        # never drifts from "A restated" to "B, which looks like a restatement of A's restatement")
        founders = {o.cluster for _, o in near if o.cluster == o.id}
        return min((n for n in near if n[1].cluster in founders), key=lambda n: (-n[0], n[1].id), default=None)

    def place(self, incoming: MemoryItem, vector: Vector) -> ItemResult:
        key = (incoming.project, incoming.id)
        previous = self.batch.items.get(key) or next(iter(self.store.get(incoming.project, [incoming.id])), None)
        # what outcomes taught about an item stays when it is re-imported (feedback is learned, never imported);
        # the cluster is ingestion's to assign, whatever the input says
        item = (consolidated(previous, incoming) if previous else incoming).model_copy(
            update={
                "feedback": previous.feedback if previous else incoming.feedback,
                "pinned": previous.pinned if previous else incoming.pinned,  # a person's pin outlives re-imports
            }
        )
        if previous is None and self.threshold is not None:
            existing = self.exact_duplicate(item, vector)
            if existing is not None:
                merged = merged_item(existing, item)
                text = merged.embedding_text()  # the same words, but the title may be the existing item's
                self.batch.put(merged, vector if text == item.embedding_text() else self.embedder.embed([text])[0])
                return ItemResult(item.id, item.project, Action.MERGED, existing.cluster, into=existing.id)
        action = Action.REPLACED if previous else Action.ADDED
        if previous is not None and previous.content_hash == item.content_hash and previous.kind is item.kind:
            cluster_id = previous.cluster_id  # same text: same cluster (None stays None: its own)
            near = None
        else:
            near = self.nearest(item, vector)
            cluster_id = near[1].cluster if near else None
        self.batch.put(item.model_copy(update={"cluster_id": cluster_id}), vector)
        return ItemResult(
            item.id,
            item.project,
            action,
            cluster_id or item.id,
            near=near[1].id if near else None,
            similarity=round(near[0], 4) if near else None,
        )


def ingest(
    items: Sequence[MemoryItem],
    embedder: Embedder,
    store: VectorStore,
    *,
    near_duplicate: float | None = DEFAULT_NEAR_DUPLICATE,
    progress: Progress | None = None,
) -> IngestReport:
    """Embed and store ``items`` (see the module doc); ``near_duplicate`` None: no merging and no clustering, every
    item is stored as itself (benchmarks' templated corpora).

    ``progress(done, total)`` is called as items are embedded and placed.
    """
    if not items:
        return IngestReport(results=(), projects=())
    items = [redact_item(item) for item in items]  # the store's door: no secret is embedded or stored
    if near_duplicate is not None and not 0.0 < near_duplicate <= 1.0:
        raise ValueError(f"near_duplicate must be in (0, 1], got {near_duplicate}")
    run = _Ingest(embedder, store, near_duplicate)
    results: list[ItemResult] = []
    if progress is not None:
        progress(0, len(items))
    for start in range(0, len(items), EMBED_CHUNK):
        chunk = items[start : start + EMBED_CHUNK]
        vectors = embedder.embed([item.embedding_text() for item in chunk])
        results.extend(run.place(item, vector) for item, vector in zip(chunk, vectors, strict=True))
        if progress is not None:
            progress(len(results), len(items))
    superseded, missing = _supersede(run.batch, embedder, store)
    written = list(run.batch.items.values())
    store.upsert(written, [run.batch.vectors[(i.project, i.id)] for i in written])
    return IngestReport(
        results=tuple(results),
        projects=tuple(sorted({i.project for i in items})),
        superseded=tuple(superseded),
        supersede_missing=tuple(missing),
    )


def _supersede(batch: _Batch, embedder: Embedder, store: VectorStore) -> tuple[list[Key], list[Key]]:
    """Mark the items the batch's items supersede; returns (newly superseded, not found)."""
    superseded: list[Key] = []
    missing: list[Key] = []
    for item in list(batch.items.values()):
        for old_id in item.supersedes:
            key = (item.project, old_id)
            old = batch.items.get(key)
            if old is None:
                stored = store.get(item.project, [old_id])
                old = stored[0] if stored else None
            if old is None:
                missing.append(key)
                continue
            if old.superseded_by == item.id:
                continue
            vector = batch.vectors.get(key) or embedder.embed([old.embedding_text()])[0]
            batch.put(old.model_copy(update={"superseded_by": item.id}), vector)
            superseded.append(key)
    return superseded, missing
