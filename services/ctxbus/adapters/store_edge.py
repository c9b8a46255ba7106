"""The ``VectorStore`` port on Qdrant Edge: the Qdrant engine in process, under the data directory.

One process owns a shard at a time (its WAL is locked): a second opener gets
:class:`StoreBusy`. The embedding model id and dimension are kept in
``ctxbus-store.json`` beside the shard; a store built with another model is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ctxbus.adapters.store_payload import DENSE, INDEXED_KEYWORDS, check_model, item_payload, payload_item
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, point_id
from ctxbus.ports import SearchHit, SearchQuery, StoreBusy, Vector

META_FILE = "ctxbus-store.json"
SHARD_DIR = "shard"


def _filter(query: SearchQuery) -> Any:
    projects = [query.project, GLOBAL_PROJECT] if query.include_global else [query.project]
    must: list[Any] = [qe.FieldCondition(key="project", match=qe.MatchAny(any=projects))]
    if query.kinds:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchAny(any=[k.value for k in query.kinds])))
    if query.domain:
        must.append(qe.FieldCondition(key="domains", match=qe.MatchValue(value=query.domain.strip().lower())))
    if query.min_confidence is not None:
        must.append(qe.FieldCondition(key="confidence", range=qe.RangeFloat(gte=query.min_confidence)))
    must_not: list[Any] = []
    if query.exclude_kinds:
        must_not.append(qe.FieldCondition(key="kind", match=qe.MatchAny(any=[k.value for k in query.exclude_kinds])))
    return qe.Filter(must=must, must_not=must_not or None)


def _project_filter(project: str) -> Any:
    return qe.Filter(must=[qe.FieldCondition(key="project", match=qe.MatchValue(value=project))])


class EdgeVectorStore:
    def __init__(self, path: Path, *, model_id: str, dim: int) -> None:
        self._path = path
        self._model_id = model_id
        meta_path = path / META_FILE
        shard_path = path / SHARD_DIR
        if meta_path.exists():
            check_model(f"the store at {path}", json.loads(meta_path.read_text()), model_id, dim)
        config = qe.EdgeConfig(vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)})
        try:
            if shard_path.exists() and any(shard_path.iterdir()):
                self._shard = qe.EdgeShard.load(str(shard_path), None)
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._shard = qe.EdgeShard.create(str(shard_path), config)
                for field in INDEXED_KEYWORDS:
                    self._shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
                self._shard.update(qe.UpdateOperation.create_field_index("confidence", qe.PayloadSchemaType.Float))
        except Exception as exc:
            text = str(exc)
            if "WouldBlock" in text or "lock" in text.lower():
                raise StoreBusy(
                    f"the embedded store at {path} is in use by another process (the running stack owns it): "
                    "stop it first, or send memories through the running stack"
                ) from None
            raise
        if not meta_path.exists():
            meta_path.write_text(json.dumps({"model_id": model_id, "dim": dim, "engine": "qdrant-edge"}))

    @property
    def model_id(self) -> str:
        return self._model_id

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None:
        if len(items) != len(vectors):
            raise ValueError(f"{len(items)} items but {len(vectors)} vectors")
        if not items:
            return
        points = [
            qe.Point(id=item.point_id, vector={DENSE: list(vec)}, payload=item_payload(item))
            for item, vec in zip(items, vectors, strict=True)
        ]
        self._shard.update(qe.UpdateOperation.upsert_points(points))

    def search(self, query: SearchQuery) -> list[SearchHit]:
        if query.limit <= 0:
            return []
        request = qe.QueryRequest(
            limit=query.limit,
            query=qe.Query.Nearest(list(query.vector), using=DENSE),
            filter=_filter(query),
            with_payload=True,
        )
        return [SearchHit(item=payload_item(p.payload or {}), score=float(p.score)) for p in self._shard.query(request)]

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        if not item_ids:
            return []
        records = self._shard.retrieve([point_id(project, i) for i in item_ids], with_payload=True, with_vector=False)
        return [payload_item(r.payload or {}) for r in records]

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        present = self.get(project, item_ids)
        if present:
            self._shard.update(qe.UpdateOperation.delete_points([i.point_id for i in present]))
        return len(present)

    def count(self, project: str | None = None) -> int:
        request = qe.CountRequest(exact=True, filter=_project_filter(project) if project else None)
        return int(self._shard.count(request))

    def close(self) -> None:
        self._shard.flush()
        self._shard.close()
