"""Adding memory items to a store without letting duplicates pile up.

For each incoming item, in order:

1. same project and id as a stored item: the new version replaces it;
2. else an *exact* duplicate (same project, same normalised content hash) or a *near* duplicate
   (same project and kind, cosine of the embedded texts at least ``near_duplicate``, and the same
   numbers stated: "pool of 20" and "pool of 40" are different facts) of a stored item, or of an
   earlier item of the same batch, other than an item it supersedes: the existing item is updated (it keeps its id
   and creation time; it takes the newer text, the higher confidence and importance, the union of
   domains and tags) instead of a second item being added;
3. else it is added.

An item that names ids in ``supersedes`` marks those items of its project ``superseded_by`` it:
they stay stored (history), searches no longer return them. The report says what happened to
every item. Replaying the same input gives the same store (ids and merges are deterministic).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxbus.memory.model import MemoryItem
from ctxbus.ports import Embedder, SearchMode, SearchQuery, Vector, VectorStore

#: Cosine at or above which two items of one project and kind are the same memory. Calibrated on
#: ``bench/data/retrieval/dedupe_pairs.jsonl`` (``ctxbus bench dedupe`` prints the figures).
DEFAULT_NEAR_DUPLICATE = 0.75


@dataclass(frozen=True, slots=True)
class Merge:
    """An incoming item folded into an existing one."""

    incoming_id: str
    existing_id: str
    project: str
    similarity: float
    exact: bool


@dataclass(frozen=True, slots=True)
class IngestReport:
    #: incoming items written as themselves (added, or replacing their own earlier version)
    upserted: int
    projects: tuple[str, ...]
    #: incoming items that updated an existing item instead of adding one
    merged: tuple[Merge, ...] = ()
    #: (project, id) of items newly marked superseded
    superseded: tuple[tuple[str, str], ...] = ()
    #: ids named in ``supersedes`` that were not found, as (project, id)
    supersede_missing: tuple[tuple[str, str], ...] = field(default=())


_NUMBER = re.compile(r"(\d+(?:[.,]\d+)?)\s*([a-z%]+)?")
_WORD = re.compile(r"[a-z']+")
#: Pairs of opposite words: two texts that take opposite sides of a pair state different facts
#: ("5 minutes" vs "5 seconds" is caught by the numbers with their units).
CONTRASTS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (
        frozenset({"never", "not", "no", "don't", "dont", "avoid", "without", "cannot", "can't", "shouldn't"}),
        frozenset(),
    ),
    (frozenset({"before", "pre", "prior", "earlier"}), frozenset({"after", "post", "later"})),
    (frozenset({"enable", "enabled", "on"}), frozenset({"disable", "disabled", "off"})),
    (
        frozenset({"increase", "raise", "raised", "more", "higher", "larger", "longer"}),
        frozenset({"decrease", "reduce", "reduced", "lower", "less", "fewer", "smaller", "shorter"}),
    ),
    (
        frozenset({"read", "reads", "reader", "replica", "replicas"}),
        frozenset({"write", "writes", "writer", "primary"}),
    ),
    (frozenset({"min", "minimum", "least"}), frozenset({"max", "maximum", "most"})),
    (frozenset({"sync", "synchronous"}), frozenset({"async", "asynchronous"})),
    (frozenset({"client", "frontend", "browser"}), frozenset({"server", "backend"})),
)


#: Words that negate a statement ("don't page" vs "page").
NEGATIONS = frozenset(
    {"not", "never", "don't", "dont", "no", "cannot", "can't", "shouldn't", "mustn't", "avoid", "without"}
)


def numbers(text: str) -> frozenset[str]:
    """The numbers a text states, with their units (pool sizes, timeouts, versions)."""
    return frozenset(f"{n} {u}" if u else n for n, u in _NUMBER.findall(text.lower()))


def sides(text: str) -> tuple[int, ...]:
    """The side the text takes of each contrast: -1 (first words only), 1 (second words only), else 0."""
    words = set(_WORD.findall(text.lower().replace("-", " ")))
    return tuple((1 if b & words else 0) - (1 if a & words else 0) for a, b in CONTRASTS)


def negated(text: str) -> bool:
    return bool(NEGATIONS & set(_WORD.findall(text.lower())))


def opposite(a: str, b: str) -> bool:
    """Whether the texts take opposite sides of a contrast (before vs after, reads vs writes, ...) or one
    negates what the other says."""
    return negated(a) != negated(b) or any(x * y < 0 for x, y in zip(sides(a), sides(b), strict=True))


def near_duplicates(a: str, b: str, similarity: float, threshold: float) -> bool:
    """Whether two texts are one memory restated: similar enough, stating the same numbers with the same
    units, and not taking opposite sides of a contrast (an embedding barely sees "pre-" vs "post-upgrade")."""
    return similarity >= threshold and numbers(a) == numbers(b) and not opposite(a, b)


def _cosine(a: Vector, b: Vector) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def merged_item(existing: MemoryItem, incoming: MemoryItem) -> MemoryItem:
    """``existing`` updated by a duplicate ``incoming``: newer text, stronger scores, all labels."""
    return existing.model_copy(
        update={
            "title": incoming.title or existing.title,
            "content": incoming.content,
            "domains": tuple(dict.fromkeys((*existing.domains, *incoming.domains))),
            "tags": tuple(dict.fromkeys((*existing.tags, *incoming.tags))),
            "confidence": max(existing.confidence, incoming.confidence),
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
        }
    )


class _Batch:
    """What this ingest will write, by (project, id), with vectors; later writes win."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], MemoryItem] = {}
        self.vectors: dict[tuple[str, str], Vector] = {}

    def put(self, item: MemoryItem, vector: Vector) -> None:
        self.items[(item.project, item.id)] = item
        self.vectors[(item.project, item.id)] = vector

    def duplicate_of(self, item: MemoryItem, vector: Vector, threshold: float) -> tuple[MemoryItem, float, bool] | None:
        best: tuple[MemoryItem, float, bool] | None = None
        for key, other in self.items.items():
            if other.project != item.project or other.id == item.id or not other.active:
                continue
            if other.content_hash == item.content_hash:
                return other, 1.0, True
            if other.kind is item.kind and other.id not in item.supersedes:
                sim = _cosine(vector, self.vectors[key])
                if near_duplicates(item.content, other.content, sim, threshold) and (best is None or sim > best[1]):
                    best = (other, sim, False)
        return best


def _stored_duplicate(
    item: MemoryItem, vector: Vector, store: VectorStore, threshold: float
) -> tuple[MemoryItem, float, bool] | None:
    hits = store.search(
        SearchQuery(
            vector=vector,
            project=item.project,
            include_global=False,
            kinds=[item.kind],
            mode=SearchMode.DENSE,
            limit=5,
        )
    )
    for hit in hits:
        if hit.item.id == item.id or hit.item.id in item.supersedes:  # what it replaces is not its duplicate
            continue
        if hit.item.content_hash == item.content_hash:
            return hit.item, 1.0, True
        if near_duplicates(item.content, hit.item.content, hit.score, threshold):
            return hit.item, hit.score, False
    return None


def ingest(
    items: Sequence[MemoryItem],
    embedder: Embedder,
    store: VectorStore,
    *,
    near_duplicate: float | None = DEFAULT_NEAR_DUPLICATE,
) -> IngestReport:
    """Embed and store ``items`` (see the module doc); ``near_duplicate`` None turns merging off."""
    if not items:
        return IngestReport(upserted=0, projects=())
    if near_duplicate is not None and not 0.0 < near_duplicate <= 1.0:
        raise ValueError(f"near_duplicate must be in (0, 1], got {near_duplicate}")
    vectors = embedder.embed([item.embedding_text() for item in items])
    batch = _Batch()
    merges: list[Merge] = []
    own: set[tuple[str, str]] = set()
    for incoming, vector in zip(items, vectors, strict=True):
        key = (incoming.project, incoming.id)
        previous = batch.items.get(key) or next(iter(store.get(incoming.project, [incoming.id])), None)
        replaced = previous is not None
        # what outcomes taught about an item stays when it is re-imported (feedback is learned, never imported)
        item = incoming.model_copy(update={"feedback": previous.feedback}) if previous else incoming
        found = None
        if near_duplicate is not None and not replaced:
            found = batch.duplicate_of(item, vector, near_duplicate) or _stored_duplicate(
                item, vector, store, near_duplicate
            )
        if found is None:
            batch.put(item, vector)
            own.add(key)
            continue
        existing, similarity, exact = found
        existing = batch.items.get((existing.project, existing.id), existing)
        batch.put(merged_item(existing, item), vector)
        merges.append(Merge(item.id, existing.id, item.project, round(similarity, 4), exact))
    superseded, missing = _supersede(batch, embedder, store)
    written = list(batch.items.values())
    store.upsert(written, [batch.vectors[(i.project, i.id)] for i in written])
    return IngestReport(
        upserted=len(own),
        projects=tuple(sorted({i.project for i in items})),
        merged=tuple(merges),
        superseded=tuple(superseded),
        supersede_missing=tuple(missing),
    )


def _supersede(
    batch: _Batch, embedder: Embedder, store: VectorStore
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Mark the items the batch's items supersede; returns (newly superseded, not found)."""
    superseded: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
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
