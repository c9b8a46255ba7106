"""Both vector-store adapters, held to the same behaviour: Qdrant Edge on disk, and the Qdrant server
adapter against QdrantClient(":memory:") (same models as a server). Plus their congruence."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.bench.corpus import memories, prompts
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind
from ctxbus.ports import SearchQuery, StoreBusy, StoreModelMismatch, VectorStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLmEmbedder:
    return OnnxMiniLmEmbedder()


def open_adapter(kind: str, tmp_path: Path, embedder: OnnxMiniLmEmbedder, model_id: str | None = None) -> VectorStore:
    model = model_id or embedder.model_id
    if kind == "edge":
        return EdgeVectorStore(tmp_path / "store", model_id=model, dim=embedder.dim)
    return QdrantServerStore(QdrantClient(":memory:"), "memory", model_id=model, dim=embedder.dim)


@pytest.fixture(params=["edge", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> Iterator[VectorStore]:
    s = open_adapter(request.param, tmp_path, embedder)
    yield s
    s.close()


def mem(i: str, project: str, content: str, **kw: object) -> MemoryItem:
    return MemoryItem.model_validate({"id": i, "project": project, "kind": "pattern", "content": content, **kw})


CORPUS = [
    mem(
        "reset",
        "acme",
        "Password reset must revoke refresh tokens before the next login",
        domains=("auth",),
        confidence=0.9,
    ),
    mem("ratelimit", "acme", "Rate limit login attempts per account", domains=("auth",), confidence=0.6),
    mem(
        "migr",
        "acme",
        "Add nullable columns first, then backfill",
        domains=("database",),
        confidence=0.8,
        kind="warning",
    ),
    mem(
        "secret",
        "other",
        "Password reset in the other project uses the legacy SSO bridge",
        domains=("auth",),
        confidence=0.99,
    ),
    mem("global-tip", GLOBAL_PROJECT, "Never log passwords or reset tokens", domains=("auth",), confidence=0.7),
]


def search(store: VectorStore, embedder: OnnxMiniLmEmbedder, text: str, **kw: object) -> list[str]:
    query = SearchQuery(vector=embedder.embed_query(text), **kw)  # type: ignore[arg-type]
    return [h.item.id for h in store.search(query)]


def test_search_is_scoped_to_the_project_plus_global(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    ingest(CORPUS, embedder, store)
    found = search(store, embedder, "revoke refresh tokens after a password reset", project="acme", limit=10)
    assert found[0] == "reset"
    assert "secret" not in found and "global-tip" in found
    assert "global-tip" not in search(store, embedder, "password", project="acme", limit=10, include_global=False)
    assert search(store, embedder, "legacy SSO bridge", project="other", limit=10)[0] == "secret"


def test_filters_by_kind_domain_and_confidence(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    ingest(CORPUS, embedder, store)
    assert search(store, embedder, "login", project="acme", domain="database", limit=10) == ["migr"]
    assert search(store, embedder, "login", project="acme", kinds=[MemoryKind.WARNING], limit=10) == ["migr"]
    assert "migr" not in search(store, embedder, "x", project="acme", exclude_kinds=[MemoryKind.WARNING], limit=10)
    high = search(store, embedder, "login", project="acme", min_confidence=0.85, limit=10, include_global=False)
    assert high == ["reset"]


def test_items_round_trip_and_upsert_replaces(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    ingest(CORPUS, embedder, store)
    (got,) = store.get("acme", ["reset"])
    assert got == CORPUS[0]
    assert got.created_at.tzinfo is not None
    ingest([CORPUS[0].model_copy(update={"content": "Revoke sessions on reset", "confidence": 0.5})], embedder, store)
    assert store.count("acme") == 3 and store.count() == 5
    assert store.get("acme", ["reset"])[0].content == "Revoke sessions on reset"
    assert store.delete("acme", ["reset", "missing"]) == 1
    assert store.count("acme") == 2 and store.get("acme", ["reset"]) == []


def test_the_embedded_store_survives_a_reopen_and_refuses_another_model(
    tmp_path: Path, embedder: OnnxMiniLmEmbedder
) -> None:
    s = open_adapter("edge", tmp_path, embedder)
    ingest(CORPUS, embedder, s)
    s.close()
    s = open_adapter("edge", tmp_path, embedder)
    assert s.count() == len(CORPUS)
    s.close()
    with pytest.raises(StoreModelMismatch, match="other-model"):
        open_adapter("edge", tmp_path, embedder, model_id="other-model")


def test_the_server_store_refuses_another_model(embedder: OnnxMiniLmEmbedder) -> None:
    client = QdrantClient(":memory:")
    QdrantServerStore(client, "c", model_id=embedder.model_id, dim=embedder.dim)
    with pytest.raises(StoreModelMismatch, match="other-model"):
        QdrantServerStore(client, "c", model_id="other-model", dim=embedder.dim)


def test_a_second_process_gets_store_busy(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    s = open_adapter("edge", tmp_path, embedder)
    try:
        code = (
            "import sys\nfrom pathlib import Path\nfrom ctxbus.adapters.store_edge import EdgeVectorStore\n"
            "from ctxbus.ports import StoreBusy\n"
            f"try:\n    EdgeVectorStore(Path({str(tmp_path / 'store')!r}), model_id={embedder.model_id!r}, dim=384)\n"
            "except StoreBusy as exc:\n    print('BUSY', exc); sys.exit(3)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 3, done.stderr
        assert "in use by another process" in done.stdout
    finally:
        s.close()
    assert StoreBusy.__name__ == "StoreBusy"


def test_both_adapters_return_the_same_results(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    edge = open_adapter("edge", tmp_path, embedder)
    server = open_adapter("server", tmp_path, embedder)
    items = memories(200, "bench", now=datetime(2026, 1, 1, tzinfo=UTC)) + CORPUS
    vectors = embedder.embed([i.embedding_text() for i in items])
    edge.upsert(items, vectors)
    server.upsert(items, vectors)
    try:
        for domain, text in prompts(25):
            for kw in ({}, {"domain": domain}, {"min_confidence": 0.8}):
                query = SearchQuery(vector=embedder.embed_query(text), project="bench", limit=8, **kw)  # type: ignore[arg-type]
                a, b = edge.search(query), server.search(query)
                assert [h.item.id for h in a] == [h.item.id for h in b], (text, kw)
                assert [round(h.score, 4) for h in a] == pytest.approx([round(h.score, 4) for h in b], abs=1e-4)
    finally:
        edge.close()
        server.close()
