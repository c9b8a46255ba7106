"""What both vector-store adapters share, so the engines cannot drift apart.

- the point payload of a memory item (its fields, JSON mode, plus ``content_hash``) and back;
- the search scope of a :class:`~ctxbus.ports.SearchQuery`, engine-neutral (each adapter turns it
  into its own filter classes);
- the embedding-model record a store keeps, and the check that refuses another model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ctxbus.core.fusion import dense_only, fuse, lexical_only
from ctxbus.core.lexical import SparseVector, document_vector, query_vector
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import SearchHit, SearchMode, SearchQuery, StoreModelMismatch, Vector

#: name of the dense vector of every point
DENSE = "dense"
#: name of the sparse (BM25 term weights, IDF applied by the engine) vector of every point
SPARSE = "lexical"
#: keyword payload fields with an index (filters on them stay fast)
KEYWORD_INDEXES = ("project", "kind", "domains", "id", "content_hash", "status")
#: float payload fields with an index
FLOAT_INDEXES = ("confidence", "importance")
#: the payload key of an item's learned feedback (a MemoryItem field, updated in place by learning)
FEEDBACK = "feedback"
#: the payload key of a person's pin (a MemoryItem field, set in place by curation)
PINNED = "pinned"
#: points read per page when every item of a scope is listed
SCROLL_PAGE = 256
#: extra payload keys, not MemoryItem fields
CONTENT_HASH = "content_hash"
#: "active", or "superseded" on an item another one replaced: kept, never searched (a keyword, not a
#: boolean: Qdrant Edge 0.9's Python binding does not match booleans)
STATUS = "status"
ACTIVE = "active"
SUPERSEDED = "superseded"
#: the point layout this code writes (1: dense only; 2: dense + lexical sparse vectors, status)
LAYOUT = 2
_ITEM_FIELDS = frozenset(MemoryItem.model_fields)

T = TypeVar("T")


def item_payload(item: MemoryItem) -> dict[str, Any]:
    """The payload stored with an item's point: every field (JSON mode) plus ``content_hash``."""
    payload = item.model_dump(mode="json")
    payload[CONTENT_HASH] = item.content_hash
    payload[STATUS] = ACTIVE if item.active else SUPERSEDED
    return payload


def listed(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    """Items in listing order: by project, then id."""
    return sorted(items, key=lambda i: (i.project, i.id))


def item_sparse(item: MemoryItem) -> SparseVector:
    """The lexical vector stored with an item's point (the same text the embedder sees)."""
    return document_vector(item.embedding_text())


def search_mode(query: SearchQuery) -> SearchMode:
    """The mode a query really runs in: a query with no lexical terms is dense only."""
    if query.mode is SearchMode.DENSE or not query_vector(query.text):
        return SearchMode.DENSE
    return query.mode


#: (point id, score, payload) of a dense hit; (point id, bm25) of a keyword hit; (point id, payload, dense vector)
DenseRow = tuple[str, float, Mapping[str, Any] | None]
SparseRow = tuple[str, float]
FetchedRow = tuple[str, Mapping[str, Any] | None, Sequence[float] | None]


def hybrid_hits(
    query: Vector,
    dense_rows: Sequence[DenseRow],
    sparse_rows: Sequence[SparseRow],
    fetch: Callable[[list[str]], Sequence[FetchedRow]],
) -> tuple[list[SearchHit], list[SearchHit]]:
    """Both halves' hits from the engine's rows: each payload parsed once, and only the keyword hits the dense
    half did not find are fetched (``fetch``: payload and dense vector, for their cosine)."""
    by_id: dict[str, SearchHit] = {}
    dense: list[SearchHit] = []
    for pid, score, payload in dense_rows:
        hit = SearchHit(item=payload_item(payload), score=score)
        by_id[pid] = hit
        dense.append(hit)
    missing = [pid for pid, _ in sparse_rows if pid not in by_id]
    if missing:
        rows = fetch(missing)
        similarity = cosines(query, [vector for _, _, vector in rows])
        for (pid, payload, _), cos in zip(rows, similarity, strict=True):
            by_id[pid] = SearchHit(item=payload_item(payload), score=cos)
    sparse = [
        SearchHit(item=by_id[pid].item, score=by_id[pid].score, extra={"bm25": bm25})
        for pid, bm25 in sparse_rows
        if pid in by_id
    ]
    return dense, sparse


def combine(mode: SearchMode, dense: list[SearchHit], sparse: list[SearchHit], limit: int) -> list[SearchHit]:
    """The adapter's result in ``mode`` from its dense and sparse lists (see :mod:`ctxbus.core.fusion`)."""
    if mode is SearchMode.DENSE:
        return dense_only(dense, limit)
    if mode is SearchMode.SPARSE:
        return lexical_only(sparse, limit)
    return fuse(dense, sparse, limit)


def dense_of(vector: object) -> list[float] | None:
    """The dense vector among the named vectors an engine returned with a point (None if absent)."""
    if isinstance(vector, dict):
        dense = vector.get(DENSE)
        return dense if isinstance(dense, list) else None
    return None


def cosines(query: Vector, stored: Sequence[Sequence[float] | None]) -> list[float]:
    """Cosine of the query with each stored vector (0 for a missing one), in one matrix product."""
    present = [i for i, v in enumerate(stored) if v]
    result = [0.0] * len(stored)
    if not present:
        return result
    matrix = np.asarray([stored[i] for i in present], dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(q))
    values = (matrix @ q) / np.where(norms > 0, norms, 1.0)
    for i, value in zip(present, values.tolist(), strict=True):
        result[i] = float(value)
    return result


def payload_item(payload: Mapping[str, Any] | None) -> MemoryItem:
    """The item back from a payload (keys that are not item fields, like ``content_hash``, are ignored)."""
    if not payload:
        raise ValueError("a point without payload is not a ctxbus memory item")
    return MemoryItem.model_validate({k: v for k, v in payload.items() if k in _ITEM_FIELDS})


@dataclass(frozen=True, slots=True)
class SearchScope:
    """The filter of a search, engine-neutral: every present condition must hold."""

    projects: tuple[str, ...]
    #: kind must be one of these; empty: any kind
    kinds: tuple[str, ...]
    exclude_kinds: tuple[str, ...]
    #: the item's ``domains`` must contain it (normalised as items normalise theirs)
    domain: str | None
    min_confidence: float | None
    min_importance: float | None
    #: the item's ``content_hash`` must equal it (exact duplicates)
    content_hash: str | None = None


def search_scope(query: SearchQuery) -> SearchScope:
    """The scope of ``query``: its project, plus the global scope when ``include_global``.

    ``kinds`` None or empty means any kind; ``domain`` is stripped and lower-cased like item domains.
    """
    projects: tuple[str, ...] = (query.project,)
    if query.include_global and query.project != GLOBAL_PROJECT:
        projects = (query.project, GLOBAL_PROJECT)
    domain = query.domain.strip().lower() if query.domain else ""
    return SearchScope(
        projects=projects,
        kinds=tuple(k.value for k in query.kinds or ()),
        exclude_kinds=tuple(k.value for k in query.exclude_kinds),
        domain=domain or None,
        min_confidence=query.min_confidence,
        min_importance=query.min_importance,
        content_hash=query.content_hash,
    )


def check_vectors(items: Sequence[MemoryItem], vectors: Sequence[Vector], dim: int) -> None:
    """Refuse an upsert whose vectors do not pair with the items or have the wrong length."""
    if len(items) != len(vectors):
        raise ValueError(f"{len(items)} items but {len(vectors)} vectors")
    for item, vector in zip(items, vectors, strict=True):
        check_dim(vector, dim, what=f"the vector of item {item.project}/{item.id}")


def check_dim(vector: Vector, dim: int, *, what: str = "the query vector") -> None:
    if len(vector) != dim:
        raise ValueError(f"{what} has {len(vector)} dimensions, the store holds {dim}-dimensional vectors")


def chunks(values: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` values."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def model_record(model_id: str, dim: int) -> dict[str, Any]:
    """What a store keeps about the model its vectors come from."""
    return {"model_id": model_id, "dim": dim, "layout": LAYOUT}


def check_model(where: str, stored: Mapping[str, Any] | None, model_id: str, dim: int) -> None:
    """Refuse a store built with another embedding model or dimension (``stored`` None: no record)."""
    stored = stored or {}
    stored_model, stored_dim = stored.get("model_id"), stored.get("dim")
    if stored_model == model_id and stored_dim == dim:
        if stored.get("layout", 1) != LAYOUT:
            raise StoreModelMismatch(
                f"{where} was built by an older ctxbus (point layout {stored.get('layout', 1)}, without the "
                f"lexical vectors hybrid search needs; this version writes layout {LAYOUT}). Re-import the "
                "memories into a new store (another CTXBUS_DATA_DIR or CTXBUS_QDRANT_COLLECTION)."
            )
        return
    built = f"{stored_model!r} ({stored_dim} dims)" if stored_model else "an unknown model (no ctxbus model record)"
    raise StoreModelMismatch(
        f"{where} was built with the embedding model {built}, but ctxbus now embeds with {model_id!r} "
        f"({dim} dims): vectors of two models cannot be compared. Re-import the memories into a new store "
        "(another CTXBUS_DATA_DIR or CTXBUS_QDRANT_COLLECTION), or run with the model that built it."
    )
