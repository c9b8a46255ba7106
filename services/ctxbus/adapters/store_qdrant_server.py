"""The ``VectorStore`` port on a Qdrant server, through ``qdrant-client``.

Same point ids, payload and filters as the embedded store (:mod:`ctxbus.adapters.store_edge`);
the embedding model id and dimension live in the collection's metadata and are checked on open.
Tests run it against ``QdrantClient(":memory:")``, which speaks the same models as a server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from ctxbus.adapters.store_payload import (
    CONTENT_HASH,
    DENSE,
    FEEDBACK,
    FLOAT_INDEXES,
    KEYWORD_INDEXES,
    PINNED,
    SCROLL_PAGE,
    SPARSE,
    STATUS,
    SUPERSEDED,
    DenseRow,
    FetchedRow,
    SearchScope,
    SparseRow,
    check_dim,
    check_model,
    check_vectors,
    chunks,
    combine,
    dense_of,
    hybrid_hits,
    item_payload,
    item_sparse,
    listed,
    model_record,
    payload_item,
    search_mode,
    search_scope,
)
from ctxbus.core.lexical import query_vector
from ctxbus.memory.model import Feedback, MemoryItem, point_id
from ctxbus.ports import SearchHit, SearchMode, SearchQuery, Vector
from ctxbus.settings import QdrantSettings

#: points per upsert request (keeps requests far below the server's 32 MB limit)
UPSERT_CHUNK = 256


def _project_filter(project: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="project", match=models.MatchValue(value=project))])


def _scope_filter(scope: SearchScope) -> models.Filter:
    must: list[models.Condition] = [
        models.FieldCondition(key="project", match=models.MatchAny(any=list(scope.projects)))
    ]
    if scope.kinds:
        must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=list(scope.kinds))))
    if scope.domain:
        must.append(models.FieldCondition(key="domains", match=models.MatchValue(value=scope.domain)))
    if scope.min_confidence is not None:
        must.append(models.FieldCondition(key="confidence", range=models.Range(gte=scope.min_confidence)))
    if scope.min_importance is not None:
        must.append(models.FieldCondition(key="importance", range=models.Range(gte=scope.min_importance)))
    if scope.content_hash:
        must.append(models.FieldCondition(key=CONTENT_HASH, match=models.MatchValue(value=scope.content_hash)))
    must_not: list[models.Condition] = []
    if scope.exclude_kinds:
        must_not.append(models.FieldCondition(key="kind", match=models.MatchAny(any=list(scope.exclude_kinds))))
    must_not.append(models.FieldCondition(key=STATUS, match=models.MatchValue(value=SUPERSEDED)))
    return models.Filter(must=must, must_not=must_not or None)


class QdrantServerStore:
    """Memory items in one collection of a Qdrant server (named dense vector ``dense``, cosine).

    Give either ``client`` (borrowed: :meth:`close` leaves it open) or ``url`` (and ``api_key``,
    ``timeout_s``: the store makes and owns its client).
    """

    def __init__(
        self,
        client: QdrantClient | None = None,
        collection: str = "ctxbus_memory",
        *,
        model_id: str,
        dim: int,
        url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        if (client is None) == (not url):
            raise ValueError("give either a QdrantClient or a url, not both or neither")
        self._owns_client = client is None
        self._client = client or QdrantClient(url=url, api_key=api_key, timeout=max(1, math.ceil(timeout_s)))
        self._collection = collection
        self._model_id = model_id
        self._dim = dim
        try:
            self._open_collection()
        except BaseException:
            self.close()
            raise

    @classmethod
    def connect(cls, settings: QdrantSettings, *, model_id: str, dim: int) -> QdrantServerStore:
        """The store the settings name (``CTXBUS_QDRANT_URL``, ``_API_KEY``, ``_COLLECTION``, ``_TIMEOUT_S``)."""
        return cls(
            collection=settings.collection,
            model_id=model_id,
            dim=dim,
            url=settings.url,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout_s=settings.timeout_s,
        )

    def _open_collection(self) -> None:
        where = f"the Qdrant collection {self._collection!r}"
        created = False
        if not self._client.collection_exists(self._collection):
            try:
                created = self._client.create_collection(
                    self._collection,
                    vectors_config={DENSE: models.VectorParams(size=self._dim, distance=models.Distance.COSINE)},
                    sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                    metadata=model_record(self._model_id, self._dim),
                )
            except Exception:
                if not self._client.collection_exists(self._collection):
                    raise
                # another process created it between our check and our create: check what it made
        info = self._client.get_collection(self._collection)
        metadata = info.config.metadata
        if created and metadata is None:
            raise RuntimeError(
                f"the Qdrant server did not keep the metadata of {where}: ctxbus needs a server with "
                "collection metadata (the version in docker-compose.yml has it)"
            )
        check_model(where, metadata, self._model_id, self._dim)
        present = set(info.payload_schema)
        for name in KEYWORD_INDEXES:
            if name not in present:
                self._client.create_payload_index(self._collection, name, models.PayloadSchemaType.KEYWORD)
        for name in FLOAT_INDEXES:
            if name not in present:
                self._client.create_payload_index(self._collection, name, models.PayloadSchemaType.FLOAT)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def collection(self) -> str:
        return self._collection

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None:
        """Insert or replace items (same project and id: same point); waits until applied."""
        check_vectors(items, vectors, self._dim)
        points = [
            models.PointStruct(id=item.point_id, vector=self._vectors(item, vector), payload=item_payload(item))
            for item, vector in zip(items, vectors, strict=True)
        ]
        for chunk in chunks(points, UPSERT_CHUNK):
            self._client.upsert(self._collection, points=list(chunk), wait=True)

    @staticmethod
    def _vectors(item: MemoryItem, vector: Vector) -> dict[str, Any]:
        vectors: dict[str, Any] = {DENSE: list(vector)}
        sparse = item_sparse(item)
        if sparse:
            vectors[SPARSE] = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        return vectors

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """The query's scope searched densely, lexically or both fused (see :mod:`ctxbus.core.fusion`)."""
        if query.limit <= 0:
            return []
        check_dim(query.vector, self._dim)
        mode = search_mode(query)
        flt = _scope_filter(search_scope(query))
        dense_rows: list[DenseRow] = []
        sparse_rows: list[SparseRow] = []
        if mode is not SearchMode.SPARSE:
            result = self._client.query_points(
                self._collection,
                query=list(query.vector),
                using=DENSE,
                query_filter=flt,
                limit=query.limit,
                with_payload=True,
                with_vectors=False,
            )
            dense_rows = [(str(p.id), float(p.score), p.payload) for p in result.points]
        if mode is not SearchMode.DENSE:
            terms = query_vector(query.text)
            result = self._client.query_points(
                self._collection,
                query=models.SparseVector(indices=list(terms.indices), values=list(terms.values)),
                using=SPARSE,
                query_filter=flt,
                limit=query.limit,
                with_payload=False,
                with_vectors=False,
            )
            sparse_rows = [(str(p.id), float(p.score)) for p in result.points]
        dense, sparse = hybrid_hits(query.vector, dense_rows, sparse_rows, self._fetch)
        return combine(mode, dense, sparse, query.limit)

    def _fetch(self, point_ids: list[str]) -> list[FetchedRow]:
        ids: list[models.ExtendedPointId] = list(point_ids)
        records = self._client.retrieve(self._collection, ids=ids, with_payload=True, with_vectors=[DENSE])
        return [(str(r.id), r.payload, dense_of(r.vector)) for r in records]

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        """The stored items among ``item_ids`` of ``project``, in the order asked (missing ones left out)."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return []
        records = self._client.retrieve(self._collection, ids=list(wanted), with_payload=True, with_vectors=False)
        found = {str(r.id): payload_item(r.payload) for r in records}
        return [found[p] for p in wanted if p in found]

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        """Delete items of ``project``; returns how many existed."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return 0
        records = self._client.retrieve(self._collection, ids=list(wanted), with_payload=False, with_vectors=False)
        present: list[models.ExtendedPointId] = [r.id for r in records]
        if present:
            self._client.delete(self._collection, points_selector=models.PointIdsList(points=present), wait=True)
        return len(present)

    def set_feedback(self, project: str, feedback: Mapping[str, Feedback]) -> int:
        """Replace the learned feedback of stored items of ``project``; returns how many exist."""
        wanted = {point_id(project, i): fb for i, fb in feedback.items()}
        if not wanted:
            return 0
        records = self._client.retrieve(self._collection, ids=list(wanted), with_payload=False, with_vectors=False)
        for record in records:
            payload = {FEEDBACK: wanted[str(record.id)].model_dump()}
            self._client.set_payload(self._collection, payload=payload, points=[record.id], wait=True)
        return len(records)

    def set_pinned(self, project: str, item_ids: Sequence[str], pinned: bool) -> int:
        """Mark stored items of ``project`` pinned or not; returns how many exist."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return 0
        records = self._client.retrieve(self._collection, ids=list(wanted), with_payload=False, with_vectors=False)
        present: list[models.ExtendedPointId] = [r.id for r in records]
        if present:
            self._client.set_payload(self._collection, payload={PINNED: pinned}, points=present, wait=True)
        return len(present)

    def items(self, project: str | None = None) -> list[MemoryItem]:
        """Every stored item of ``project`` (superseded ones included), or of all projects, by project and id."""
        flt = None if project is None else _project_filter(project)
        found: list[MemoryItem] = []
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = self._client.scroll(
                self._collection, scroll_filter=flt, limit=SCROLL_PAGE, offset=offset, with_payload=True
            )
            found.extend(payload_item(r.payload) for r in records)
            if offset is None or not records:
                return listed(found)

    def count(self, project: str | None = None) -> int:
        """Items of ``project`` (only that scope, not global), or of every project when None."""
        flt = None if project is None else _project_filter(project)
        return int(self._client.count(self._collection, count_filter=flt, exact=True).count)

    def close(self) -> None:
        """Close the client if this store made it (a borrowed client stays open)."""
        if self._owns_client:
            self._client.close()
