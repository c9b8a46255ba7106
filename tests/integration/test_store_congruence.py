"""Both store adapters, given the same items and vectors, answer every query the same:
same ids in the same order, scores equal to 1e-4."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind
from ctxbus.ports import SearchQuery, Vector

from .store_behaviour import CORPUS, T0

pytestmark = pytest.mark.integration

MODEL = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
PROJECTS = ("acme", "other", GLOBAL_PROJECT)
DOMAINS = ("auth", "database", "api", "ui", "testing")
KINDS = list(MemoryKind)
FILTERS: list[dict[str, object]] = [
    {},
    {"include_global": False},
    {"kinds": [MemoryKind.PATTERN, MemoryKind.WARNING]},
    {"exclude_kinds": [MemoryKind.PATTERN, MemoryKind.ATTEMPT]},
    {"domain": "database"},
    {"min_confidence": 0.75},
    {"domain": "auth", "kinds": [MemoryKind.LEARNING, MemoryKind.DECISION], "min_confidence": 0.3},
    {"project": "other", "limit": 50},
]


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic(rng: np.random.Generator, n: int) -> list[MemoryItem]:
    return [
        MemoryItem(
            id=f"m{i}",
            project=PROJECTS[i % 3],
            kind=KINDS[i % len(KINDS)],
            content=f"synthetic memory {i}",
            domains=tuple(DOMAINS[j] for j in range(len(DOMAINS)) if rng.random() < 0.35),
            confidence=round(float(rng.random()), 2),
            created_at=T0,
            updated_at=T0,
        )
        for i in range(n)
    ]


class Both(NamedTuple):
    edge: EdgeVectorStore
    server: QdrantServerStore
    queries: list[Vector]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxMiniLmEmbedder) -> Iterator[Both]:
    """(edge store, server store, query vectors) holding the same 1,500 synthetic items and the real corpus."""
    rng = np.random.default_rng(20260102)
    items = synthetic(rng, 1500) + CORPUS
    vectors: list[Vector] = unit(rng, 1500).tolist() + embedder.embed([i.embedding_text() for i in CORPUS])
    edge = EdgeVectorStore(Path(tmp_path_factory.mktemp("edge")), model_id=MODEL, dim=384)
    server = QdrantServerStore(QdrantClient(":memory:"), "congruence", model_id=MODEL, dim=384)
    for store in (edge, server):
        store.upsert(items, vectors)
    near = np.asarray(vectors[:20]) + 0.05 * unit(rng, 20)  # close to stored points: tight top scores
    queries = [
        *unit(rng, 20).tolist(),
        *(near / np.linalg.norm(near, axis=1, keepdims=True)).tolist(),
        *embedder.embed(["password reset tokens", "database migrations", "login rate limits"]),
    ]
    yield Both(edge, server, queries)
    edge.close()
    server.close()


@pytest.mark.parametrize("flt", FILTERS, ids=[",".join(f) or "plain" for f in FILTERS])
def test_both_adapters_answer_the_same(both: Both, flt: dict[str, object]) -> None:
    edge, server, queries = both
    answered = 0
    for vector in queries:
        query = SearchQuery(vector=vector, **{"project": "acme", "limit": 10, **flt})  # type: ignore[arg-type]
        a, b = edge.search(query), server.search(query)
        assert [h.item.id for h in a] == [h.item.id for h in b]
        assert [h.item for h in a] == [h.item for h in b]
        assert np.allclose([h.score for h in a], [h.score for h in b], rtol=0, atol=1e-4)
        answered += bool(a)
    assert answered == len(queries)


def test_both_adapters_count_and_get_the_same(both: Both) -> None:
    edge, server, _ = both
    for project in (*PROJECTS, None, "nobody"):
        assert edge.count(project) == server.count(project)
    wanted = ["m0", "m3", "reset", "m1", "missing"]
    assert edge.get("acme", wanted) == server.get("acme", wanted)
    assert [i.id for i in edge.get("acme", wanted)] == ["m0", "m3", "reset"]
