"""The ``VectorStore`` port on a Qdrant server, through ``qdrant-client``.

Same point ids, payload and filters as the embedded store; the embedding model
id and dimension live in the collection's metadata and are checked on open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from ctxbus.adapters.store_payload import DENSE, INDEXED_KEYWORDS, check_model, item_payload, payload_item
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, point_id
from ctxbus.ports import SearchHit, SearchQuery, Vector
from ctxbus.settings import QdrantSettings


def _filter(query: SearchQuery) -> models.Filter:
    projects = [query.project, GLOBAL_PROJECT] if query.include_global else [query.project]
    must: list[Any] = [models.FieldCondition(key="project", match=models.MatchAny(any=projects))]
    if query.kinds:
        must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=[k.value for k in query.kinds])))
    if query.domain:
        must.append(models.FieldCondition(key="domains", match=models.MatchValue(value=query.domain.strip().lower())))
    if query.min_confidence is not None:
        must.append(models.FieldCondition(key="confidence", range=models.Range(gte=query.min_confidence)))
    must_not: list[Any] = []
    if query.exclude_kinds:
        must_not.append(
            models.FieldCondition(key="kind", match=models.MatchAny(any=[k.value for k in query.exclude_kinds]))
        )
    return models.Filter(must=must, must_not=must_not or None)


class QdrantServerStore:
    def __init__(self, client: QdrantClient, collection: str, *, model_id: str, dim: int) -> None:
        self._client = client
        self._collection = collection
        self._model_id = model_id
        if client.collection_exists(collection):
            info = client.get_collection(collection)
            check_model(f"the Qdrant collection {collection!r}", dict(info.config.metadata or {}), model_id, dim)
        else:
            client.create_collection(
                collection,
                vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                metadata={"model_id": model_id, "dim": dim},
            )
            for field in INDEXED_KEYWORDS:
                client.create_payload_index(collection, field, models.PayloadSchemaType.KEYWORD)
            client.create_payload_index(collection, "confidence", models.PayloadSchemaType.FLOAT)

    @classmethod
    def connect(cls, settings: QdrantSettings, *, model_id: str, dim: int) -> QdrantServerStore:
        client = QdrantClient(
            url=settings.url,
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout=int(settings.timeout_s),
        )
        return cls(client, settings.collection, model_id=model_id, dim=dim)

    @property
    def model_id(self) -> str:
        return self._model_id

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None:
        if len(items) != len(vectors):
            raise ValueError(f"{len(items)} items but {len(vectors)} vectors")
        if not items:
            return
        points = [
            models.PointStruct(id=item.point_id, vector={DENSE: list(vec)}, payload=item_payload(item))
            for item, vec in zip(items, vectors, strict=True)
        ]
        self._client.upsert(self._collection, points=points, wait=True)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        if query.limit <= 0:
            return []
        result = self._client.query_points(
            self._collection,
            query=list(query.vector),
            using=DENSE,
            query_filter=_filter(query),
            limit=query.limit,
            with_payload=True,
        )
        return [SearchHit(item=payload_item(p.payload or {}), score=float(p.score)) for p in result.points]

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids:
            return []
        records = self._client.retrieve(
            self._collection, ids=[point_id(project, i) for i in item_ids], with_payload=True, with_vectors=False
        )
        return [payload_item(r.payload or {}) for r in records]

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        present = self.get(project, item_ids)
        if present:
            self._client.delete(
                self._collection, points_selector=models.PointIdsList(points=[i.point_id for i in present]), wait=True
            )
        return len(present)

    def count(self, project: str | None = None) -> int:
        flt = (
            models.Filter(must=[models.FieldCondition(key="project", match=models.MatchValue(value=project))])
            if project
            else None
        )
        return int(self._client.count(self._collection, count_filter=flt, exact=True).count)

    def close(self) -> None:
        self._client.close()
