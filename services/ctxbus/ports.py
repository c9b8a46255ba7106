"""The small protocols the core needs from the world. Adapters implement them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from ctxbus.memory.model import Feedback, MemoryItem, MemoryKind

Vector = list[float]


class SearchMode(StrEnum):
    """Which half of hybrid search runs: both (fused), the embedding only, or keywords (BM25) only."""

    HYBRID = "hybrid"
    DENSE = "dense"
    SPARSE = "sparse"


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A search in one project's scope (plus the global scope when asked).

    ``vector`` is the embedded query; ``text`` the query's words for the lexical half (blank: the
    search is dense only whatever the mode). Items another one superseded are never returned.
    """

    vector: Vector
    project: str
    text: str = ""
    mode: SearchMode = SearchMode.HYBRID
    limit: int = 10
    include_global: bool = True
    kinds: Sequence[MemoryKind] | None = None
    exclude_kinds: Sequence[MemoryKind] = ()
    domain: str | None = None
    min_confidence: float | None = None
    min_importance: float | None = None
    #: only items whose normalised text has this hash (``MemoryItem.content_hash``): exact duplicates
    content_hash: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    item: MemoryItem
    #: cosine similarity to the query vector (higher is better), whichever half found the item
    score: float
    #: the lexical and fusion evidence (see ctxbus.core.fusion): bm25, lexical, dense_rank, sparse_rank, rrf
    extra: dict[str, float] = field(default_factory=dict)


class Embedder(Protocol):
    """Turns text into unit vectors; also counts tokens with its own tokenizer."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    def embed_query(self, text: str) -> Vector: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class QueryBatcher(Protocol):
    """An embedder that embeds several queries together (and may remember them): ``embed_queries``."""

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]: ...


class StoreModelMismatch(RuntimeError):
    """The store was built with another embedding model (or dimension)."""


class StoreBusy(RuntimeError):
    """Another process owns the embedded store."""


class VectorStore(Protocol):
    """A project-scoped store of memory items and their vectors."""

    @property
    def model_id(self) -> str: ...

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None: ...

    def search(self, query: SearchQuery) -> list[SearchHit]: ...

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]: ...

    def delete(self, project: str, item_ids: Sequence[str]) -> int: ...

    def set_feedback(self, project: str, feedback: Mapping[str, Feedback]) -> int:
        """Replace the learned feedback of stored items (by id); returns how many were found."""
        ...

    def set_pinned(self, project: str, item_ids: Sequence[str], pinned: bool) -> int:
        """Mark stored items of ``project`` pinned or not (by id); returns how many were found."""
        ...

    def items(self, project: str | None = None) -> list[MemoryItem]:
        """Every stored item of ``project`` (only that scope; superseded ones included), or of every project when
        None, ordered by project and id: for listing, not for a request path."""
        ...

    def count(self, project: str | None = None) -> int: ...

    def close(self) -> None: ...
