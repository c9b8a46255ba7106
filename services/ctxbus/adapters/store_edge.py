"""The ``VectorStore`` port on Qdrant Edge: the Qdrant engine in process, on disk under one directory.

Layout of the directory given to :class:`EdgeVectorStore`::

    ctxbus-store.json   the embedding model id and dimension the vectors come from
    ctxbus-store.lock   held (flock) by the owning process; holds its pid
    shard/              the Qdrant Edge shard (segments, WAL, edge_config.json)

One process owns the directory at a time: a second opener gets :class:`~ctxbus.ports.StoreBusy`
with a plain message. A store built with another model or dimension is refused with
:class:`~ctxbus.ports.StoreModelMismatch`. ``optimize()`` (index building) is never called here:
it is slow and belongs to maintenance, not to a request path.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import qdrant_edge as qe

from ctxbus.adapters.store_items import ItemCache, StoredItem, hits_of, unit_vector
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
    SearchScope,
    check_dim,
    check_model,
    check_vectors,
    chunks,
    combine,
    dense_of,
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
from ctxbus.ports import SearchHit, SearchMode, SearchQuery, StoreBusy, StoreModelMismatch, Vector
from ctxbus.private_dir import make_private_dirs

META_FILE = "ctxbus-store.json"
LOCK_FILE = "ctxbus-store.lock"
SHARD_DIR = "shard"
ENGINE = "qdrant-edge"
#: points per update operation (bounds the memory of one WAL record)
UPSERT_CHUNK = 512
#: parsed items a store keeps by default (about 5 KB each with its vector)
ITEM_CACHE = 10_000


def _busy(path: Path, owner: str) -> StoreBusy:
    if owner == str(os.getpid()):
        return StoreBusy(f"the embedded store at {path} is already open in this process (pid {owner}); share that one")
    pid = f" (pid {owner})" if owner else ""
    return StoreBusy(
        f"the embedded store at {path} is in use by another process{pid}; one process owns it (the running "
        "ctxbus stack): stop that process first, or send memories through the running stack"
    )


def _lock(path: Path) -> IO[str]:
    """Take the directory's lock file or raise StoreBusy; the lock lives as long as the returned file."""
    handle = (path / LOCK_FILE).open("a+", encoding="utf-8")
    if sys.platform != "win32":  # elsewhere the engine's own WAL lock still refuses a second owner
        import fcntl  # noqa: PLC0415

        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip()
            handle.close()
            raise _busy(path, owner) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _scope_filter(scope: SearchScope) -> qe.Filter:
    must: list[Any] = [qe.FieldCondition(key="project", match=qe.MatchAny(any=list(scope.projects)))]
    if scope.kinds:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchAny(any=list(scope.kinds))))
    if scope.domain:
        must.append(qe.FieldCondition(key="domains", match=qe.MatchValue(value=scope.domain)))
    if scope.min_confidence is not None:
        must.append(qe.FieldCondition(key="confidence", range=qe.RangeFloat(gte=scope.min_confidence)))
    if scope.min_importance is not None:
        must.append(qe.FieldCondition(key="importance", range=qe.RangeFloat(gte=scope.min_importance)))
    if scope.content_hash:
        must.append(qe.FieldCondition(key=CONTENT_HASH, match=qe.MatchValue(value=scope.content_hash)))
    must_not: list[Any] = []
    if scope.exclude_kinds:
        must_not.append(qe.FieldCondition(key="kind", match=qe.MatchAny(any=list(scope.exclude_kinds))))
    must_not.append(qe.FieldCondition(key=STATUS, match=qe.MatchValue(value=SUPERSEDED)))
    return qe.Filter(must=must, must_not=must_not or None)


def _project_filter(project: str) -> qe.Filter:
    return qe.Filter(must=[qe.FieldCondition(key="project", match=qe.MatchValue(value=project))])


class EdgeVectorStore:
    """Memory items and their dense vectors in a Qdrant Edge shard under ``path`` (owned by this process)."""

    def __init__(self, path: Path | str, *, model_id: str, dim: int, item_cache: int = ITEM_CACHE) -> None:
        """``item_cache``: how many parsed items (with their vectors) searches keep (0: none; see
        :mod:`ctxbus.adapters.store_items`)."""
        self._path = Path(path)
        self._items = ItemCache(item_cache)
        self._model_id = model_id
        self._dim = dim
        make_private_dirs(self._path)
        self._shard: qe.EdgeShard | None = None
        self._lock: IO[str] | None = _lock(self._path)
        try:
            self._check_meta()
            self._shard = self._open_shard()
            self._ensure_indexes()
        except BaseException:
            self.close()
            raise

    # -- opening ----------------------------------------------------------------------------------------------

    def _check_meta(self) -> None:
        meta = self._path / META_FILE
        shard = self._path / SHARD_DIR
        if meta.exists():
            try:
                stored = json.loads(meta.read_text(encoding="utf-8"))
            except (ValueError, OSError) as exc:
                raise StoreModelMismatch(f"{meta} is unreadable ({exc}); cannot tell which model built it") from exc
            check_model(f"the store at {self._path}", stored if isinstance(stored, dict) else None, *self._model)
            return
        if shard.exists() and any(shard.iterdir()):
            check_model(f"the store at {self._path}", None, *self._model)
        # written before the shard, atomically: a shard never exists without its model record
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(json.dumps({**model_record(*self._model), "engine": ENGINE}), encoding="utf-8")
        tmp.replace(meta)

    @property
    def _model(self) -> tuple[str, int]:
        return self._model_id, self._dim

    def _open_shard(self) -> qe.EdgeShard:
        shard = self._path / SHARD_DIR
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self._dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        try:
            if (shard / "edge_config.json").exists():
                return qe.EdgeShard.load(str(shard), config)  # also checks the vector config against the segments
            return qe.EdgeShard.create(str(shard), config)
        except Exception as exc:  # the engine raises bare Exception with a Rust message
            text = str(exc)
        # translated outside the except block: the Rust error is not chained into the traceback
        if "WouldBlock" in text:
            raise _busy(self._path, "")
        if "incompatible" in text.lower():
            raise StoreModelMismatch(
                f"the shard at {shard} does not hold {self._dim}-dimensional {DENSE!r} vectors "
                f"although {self._path / META_FILE} says so ({text})"
            )
        raise RuntimeError(f"cannot open the embedded store at {self._path}: {text}")

    def _ensure_indexes(self) -> None:
        present = set(self._open.info().payload_schema)
        for name in KEYWORD_INDEXES:
            if name not in present:
                self._open.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        for name in FLOAT_INDEXES:
            if name not in present:
                self._open.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Float))

    @property
    def _open(self) -> qe.EdgeShard:
        if self._shard is None:
            raise RuntimeError(f"the embedded store at {self._path} is closed")
        return self._shard

    # -- the port ---------------------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def path(self) -> Path:
        return self._path

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None:
        """Insert or replace items (same project and id: same point)."""
        check_vectors(items, vectors, self._dim)
        points = [
            qe.Point(id=item.point_id, vector=self._vectors(item, vector), payload=item_payload(item))
            for item, vector in zip(items, vectors, strict=True)
        ]
        try:
            for chunk in chunks(points, UPSERT_CHUNK):
                self._open.update(qe.UpdateOperation.upsert_points(list(chunk)))
        finally:
            self._items.invalidate(str(p.id) for p in points)

    @staticmethod
    def _vectors(item: MemoryItem, vector: Vector) -> dict[str, Any]:
        vectors: dict[str, Any] = {DENSE: list(vector)}
        sparse = item_sparse(item)
        if sparse:
            vectors[SPARSE] = qe.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        return vectors

    def search(self, query: SearchQuery) -> list[SearchHit]:
        """The query's scope searched densely, lexically or both fused (see :mod:`ctxbus.core.fusion`)."""
        if query.limit <= 0:
            return []
        check_dim(query.vector, self._dim)
        mode = search_mode(query)
        flt = _scope_filter(search_scope(query))
        dense_rows: list[tuple[str, float]] = []
        sparse_rows: list[tuple[str, float]] = []
        if mode is not SearchMode.SPARSE:
            request = qe.QueryRequest(
                limit=query.limit,
                query=qe.Query.Nearest(list(query.vector), using=DENSE),
                filter=flt,
                with_payload=False,
                with_vector=False,
            )
            dense_rows = [(str(p.id), float(p.score)) for p in self._open.query(request)]
        if mode is not SearchMode.DENSE:
            terms = query_vector(query.text)
            request = qe.QueryRequest(
                limit=query.limit,
                query=qe.Query.Nearest(
                    qe.SparseVector(indices=list(terms.indices), values=list(terms.values)), using=SPARSE
                ),
                filter=flt,
                with_payload=False,
                with_vector=False,
            )
            sparse_rows = [(str(p.id), float(p.score)) for p in self._open.query(request)]
        stored = self._stored([pid for pid, _ in dense_rows] + [pid for pid, _ in sparse_rows])
        dense, sparse = hits_of(query.vector, dense_rows, sparse_rows, stored)
        return combine(mode, dense, sparse, query.limit)

    def _stored(self, point_ids: Sequence[str]) -> dict[str, StoredItem]:
        """The stored items of ``point_ids`` (missing ones left out): from the cache, the rest fetched (payload
        and dense vector) in one call and kept."""
        wanted = list(dict.fromkeys(point_ids))
        found = self._items.get(wanted)
        missing = [pid for pid in wanted if pid not in found]
        if missing:
            generation = self._items.generation()
            records = self._open.retrieve(list[int | uuid.UUID | str](missing), with_payload=True, with_vector=[DENSE])
            fetched = {str(r.id): StoredItem(payload_item(r.payload), unit_vector(dense_of(r.vector))) for r in records}
            self._items.put(fetched, generation)
            found.update(fetched)
        return found

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        """The stored items among ``item_ids`` of ``project``, in the order asked (missing ones left out)."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return []
        found = self._stored(wanted)
        return [found[p].item for p in wanted if p in found]

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        """Delete items of ``project``; returns how many existed."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return 0
        present = [str(r.id) for r in self._open.retrieve(list(wanted), with_payload=False, with_vector=False)]
        if present:
            try:
                self._open.update(qe.UpdateOperation.delete_points(list(present)))
            finally:
                self._items.invalidate(present)
        return len(present)

    def set_feedback(self, project: str, feedback: Mapping[str, Feedback]) -> int:
        """Replace the learned feedback of stored items of ``project``; returns how many exist."""
        wanted = {point_id(project, i): fb for i, fb in feedback.items()}
        if not wanted:
            return 0
        present = [str(r.id) for r in self._open.retrieve(list(wanted), with_payload=False, with_vector=False)]
        try:
            for pid in present:
                self._open.update(qe.UpdateOperation.set_payload([pid], {FEEDBACK: wanted[pid].model_dump()}))
        finally:
            self._items.invalidate(present)
        return len(present)

    def set_pinned(self, project: str, item_ids: Sequence[str], pinned: bool) -> int:
        """Mark stored items of ``project`` pinned or not; returns how many exist."""
        wanted = [point_id(project, i) for i in dict.fromkeys(item_ids)]
        if not wanted:
            return 0
        present = [str(r.id) for r in self._open.retrieve(list(wanted), with_payload=False, with_vector=False)]
        try:
            if present:
                self._open.update(qe.UpdateOperation.set_payload(list(present), {PINNED: pinned}))
        finally:
            self._items.invalidate(present)
        return len(present)

    def items(self, project: str | None = None) -> list[MemoryItem]:
        """Every stored item of ``project`` (superseded ones included), or of all projects, by project and id."""
        flt = None if project is None else _project_filter(project)
        found: list[MemoryItem] = []
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=flt, with_payload=True, with_vector=False
            )
            records, offset = self._open.scroll(request)
            found.extend(payload_item(r.payload) for r in records)
            if offset is None or not records:
                return listed(found)

    def count(self, project: str | None = None) -> int:
        """Items of ``project`` (only that scope, not global), or of every project when None."""
        flt = None if project is None else _project_filter(project)
        return int(self._open.count(qe.CountRequest(exact=True, filter=flt)))

    def close(self) -> None:
        """Flush to disk, close the shard and give up ownership. Closing twice is harmless."""
        shard, self._shard = self._shard, None
        self._items.invalidate()
        try:
            if shard is not None:
                shard.flush()
                shard.close()
        finally:
            self._release()

    def _release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()  # closing the file drops the flock

    def __enter__(self) -> EdgeVectorStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
