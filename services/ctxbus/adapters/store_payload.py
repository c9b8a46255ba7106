"""What both vector-store adapters share, so the engines cannot drift apart.

- the point payload of a memory item (its fields, JSON mode, plus ``content_hash``) and back;
- the search scope of a :class:`~ctxbus.ports.SearchQuery`, engine-neutral (each adapter turns it
  into its own filter classes);
- the embedding-model record a store keeps, and the check that refuses another model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import SearchQuery, StoreModelMismatch, Vector

#: name of the dense vector of every point
DENSE = "dense"
#: keyword payload fields with an index (filters on them stay fast)
KEYWORD_INDEXES = ("project", "kind", "domains", "id")
#: float payload fields with an index
FLOAT_INDEXES = ("confidence",)
#: extra payload key, not a MemoryItem field
CONTENT_HASH = "content_hash"
_ITEM_FIELDS = frozenset(MemoryItem.model_fields)

T = TypeVar("T")


def item_payload(item: MemoryItem) -> dict[str, Any]:
    """The payload stored with an item's point: every field (JSON mode) plus ``content_hash``."""
    payload = item.model_dump(mode="json")
    payload[CONTENT_HASH] = item.content_hash
    return payload


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
    return {"model_id": model_id, "dim": dim}


def check_model(where: str, stored: Mapping[str, Any] | None, model_id: str, dim: int) -> None:
    """Refuse a store built with another embedding model or dimension (``stored`` None: no record)."""
    stored = stored or {}
    stored_model, stored_dim = stored.get("model_id"), stored.get("dim")
    if stored_model == model_id and stored_dim == dim:
        return
    built = f"{stored_model!r} ({stored_dim} dims)" if stored_model else "an unknown model (no ctxbus model record)"
    raise StoreModelMismatch(
        f"{where} was built with the embedding model {built}, but ctxbus now embeds with {model_id!r} "
        f"({dim} dims): vectors of two models cannot be compared. Re-import the memories into a new store "
        "(another CTXBUS_DATA_DIR or CTXBUS_QDRANT_COLLECTION), or run with the model that built it."
    )
