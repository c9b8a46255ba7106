"""Lossless ingestion on both stores: only exact duplicates merge; near duplicates stay separate items linked by a
cluster id (deterministic, existing items without one are their own cluster); supersedes retires items."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.memory.ingest import Action, ingest
from ctxbus.memory.model import MemoryItem
from ctxbus.memory.near_copies import DEFAULT_NEAR_DUPLICATE
from ctxbus.ports import SearchQuery, VectorStore

pytestmark = pytest.mark.integration


def mem(item_id: str, content: str, project: str = "acme", **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {"id": item_id, "project": project, "kind": "learning", "content": content, **fields}
    )


@pytest.fixture(params=["edge", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> Iterator[VectorStore]:
    if request.param == "edge":
        with EdgeVectorStore(tmp_path / "store", model_id=embedder.model_id, dim=embedder.dim) as edge:
            yield edge
        return
    client = QdrantClient(":memory:")
    server = QdrantServerStore(client, "memories", model_id=embedder.model_id, dim=embedder.dim)
    yield server
    server.close()
    client.close()


MIGRATION = "Always run database schema migrations inside a single transaction so a failure rolls back cleanly."
MIGRATION_AGAIN = (
    "Always run the database schema migrations inside one transaction, so that a failure rolls back cleanly."
)
POOL_READS = "Use a connection pool of 20 for the read replicas."
POOL_WRITES = "Use a connection pool of 5 for the primary database writes."


def actions(report: object) -> list[tuple[str, str, str | None]]:
    return [(r.id, r.action.value, r.into) for r in report.results]  # type: ignore[attr-defined]


def test_an_exact_duplicate_under_another_id_updates_the_existing_item(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    ingest([mem("m1", MIGRATION, confidence=0.6, tags=("db",))], embedder, store)
    report = ingest(
        [
            mem(
                "m2",
                "  always RUN database schema migrations inside a single transaction so a failure rolls back cleanly.",
                confidence=0.8,
                tags=("migrations",),
            )
        ],
        embedder,
        store,
    )
    assert actions(report) == [("m2", "merged", "m1")] and report.upserted == 0
    assert report.merged[0].cluster_id == "m1"
    assert store.count("acme") == 1
    (kept,) = store.get("acme", ["m1"])
    assert kept.confidence == 0.8 and kept.tags == ("db", "migrations")


def test_a_near_duplicate_is_kept_in_the_cluster_of_the_item_it_restates(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    ingest([mem("m1", MIGRATION), mem("p1", POOL_READS)], embedder, store)
    report = ingest([mem("m2", MIGRATION_AGAIN), mem("p2", POOL_WRITES)], embedder, store)
    assert actions(report) == [("m2", "added", None), ("p2", "added", None)] and report.merged == ()
    m2, p2 = report.results
    assert (m2.cluster_id, m2.near) == ("m1", "m1") and m2.clustered and report.clustered == 1
    assert m2.similarity is not None and DEFAULT_NEAR_DUPLICATE <= m2.similarity < 1.0
    assert (p2.cluster_id, p2.near) == ("p2", None)  # a different fact on the same topic: its own cluster
    assert store.count("acme") == 4
    stored = {i.id: i for i in store.get("acme", ["m1", "m2", "p1", "p2"])}
    assert stored["m1"].content == MIGRATION and stored["m2"].content == MIGRATION_AGAIN  # both kept, as written
    assert [stored[i].cluster for i in ("m1", "m2", "p1", "p2")] == ["m1", "m1", "p1", "p2"]
    assert stored["m1"].cluster_id is None  # the founder is its own cluster
    # both are found, each first by its own text
    for item_id, text in (("m1", MIGRATION), ("m2", MIGRATION_AGAIN)):
        hits = store.search(SearchQuery(vector=embedder.embed_query(text), project="acme", text=text, limit=2))
        assert hits[0].item.id == item_id


def test_other_projects_kinds_and_clustering_off_stay_separate(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    ingest([mem("m1", MIGRATION)], embedder, store)
    other = ingest([mem("m1", MIGRATION, project="other"), mem("w1", MIGRATION, kind="warning")], embedder, store)
    # off (benchmarks' templated corpora): no clustering, and not even exact copies merge
    off = ingest([mem("m9", MIGRATION_AGAIN), mem("m8", MIGRATION)], embedder, store, near_duplicate=None)
    assert [r.cluster_id for r in (*other.results, *off.results)] == ["m1", "w1", "m9", "m8"]
    assert [r.action for r in (*other.results, *off.results)] == [Action.ADDED] * 4
    assert (store.count("acme"), store.count("other")) == (4, 1)


def test_within_one_batch_exact_copies_merge_near_copies_cluster_and_same_id_replaces(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    report = ingest(
        [
            mem("m1", MIGRATION),
            mem("m2", MIGRATION_AGAIN),
            mem("m3", MIGRATION.upper()),
            mem("m1", MIGRATION, importance=0.9),
        ],
        embedder,
        store,
    )
    assert actions(report) == [
        ("m1", "added", None),
        ("m2", "added", None),
        ("m3", "merged", "m1"),
        ("m1", "replaced", None),
    ]
    assert [r.cluster_id for r in report.results] == ["m1", "m1", "m1", "m1"]
    assert store.count("acme") == 2
    m1, m2 = store.get("acme", ["m1", "m2"])
    assert m1.importance == 0.9 and m1.content == MIGRATION and m2.cluster_id == "m1"


def test_clusters_are_deterministic_and_a_replay_changes_nothing(
    store: VectorStore, embedder: OnnxMiniLmEmbedder, tmp_path: Path
) -> None:
    batch = [mem("a", MIGRATION), mem("b", MIGRATION_AGAIN), mem("c", POOL_READS), mem("d", MIGRATION.lower())]
    first = ingest(batch, embedder, store)
    again = ingest(batch, embedder, store)
    assert [r.action.value for r in again.results] == ["replaced", "replaced", "replaced", "merged"]
    assert [r.cluster_id for r in again.results] == [r.cluster_id for r in first.results] == ["a", "a", "c", "a"]
    assert store.count("acme") == 3
    with EdgeVectorStore(tmp_path / "fresh", model_id=embedder.model_id, dim=embedder.dim) as fresh:
        elsewhere = ingest(batch, embedder, fresh)
        assert [(r.action, r.cluster_id) for r in elsewhere.results] == [
            (r.action, r.cluster_id) for r in first.results
        ]


def test_an_item_stored_without_a_cluster_is_its_own_and_a_changed_text_is_placed_again(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    # as an older ctxbus stored it: no cluster id at all
    legacy = mem("old", MIGRATION)
    store.upsert([legacy], embedder.embed([legacy.embedding_text()]))
    assert store.get("acme", ["old"])[0].cluster == "old"
    joined = ingest([mem("new", MIGRATION_AGAIN)], embedder, store)
    assert joined.results[0].cluster_id == "old"
    # the same text again keeps the cluster; another text is placed again
    same = ingest([mem("new", MIGRATION_AGAIN, confidence=0.9)], embedder, store)
    moved = ingest([mem("new", POOL_WRITES)], embedder, store)
    assert (same.results[0].action, same.results[0].cluster_id) == (Action.REPLACED, "old")
    assert (moved.results[0].action, moved.results[0].cluster_id) == (Action.REPLACED, "new")
    assert store.get("acme", ["new"])[0].cluster_id is None


def test_the_cluster_id_is_never_taken_from_the_input(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    report = ingest([mem("x", POOL_READS, cluster_id="forged")], embedder, store)
    assert report.results[0].cluster_id == "x" and store.get("acme", ["x"])[0].cluster_id is None


def test_supersedes_retires_the_old_item_but_keeps_it(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    ingest([mem("old", POOL_READS)], embedder, store)
    report = ingest(
        [mem("new", "Read replicas now use a pool of 40 connections.", supersedes=("old", "ghost"))], embedder, store
    )
    assert report.superseded == (("acme", "old"),) and report.supersede_missing == (("acme", "ghost"),)
    hits = store.search(SearchQuery(vector=embedder.embed_query(POOL_READS), project="acme", text=POOL_READS))
    assert [h.item.id for h in hits] == ["new"]
    assert store.get("acme", ["old"])[0].superseded_by == "new"
    # idempotent: the same input again changes nothing
    again = ingest(
        [mem("new", "Read replicas now use a pool of 40 connections.", supersedes=("old",))], embedder, store
    )
    assert again.superseded == () and store.count("acme") == 2


def test_progress_is_reported_and_a_bad_threshold_is_refused(store: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    seen: list[tuple[int, int]] = []
    items = [mem(f"t{n}", f"Turn number {n} of a long conversation about topic {n}.") for n in range(70)]
    ingest(items, embedder, store, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 70), (64, 70), (70, 70)]
    with pytest.raises(ValueError, match="near_duplicate"):
        ingest([mem("m1", MIGRATION)], embedder, store, near_duplicate=1.5)


class Geometry:
    """An embedder with hand-placed vectors: A~B and B~C are near copies (cosine 0.8), A and C are not (0.5)."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
    dim = 384
    max_tokens = 256
    PLACES: ClassVar[dict[str, tuple[float, float, float]]] = {
        "alpha": (1.0, 0.0, 0.0),
        "beta": (0.8, 0.6, 0.0),
        "gamma": (0.5, 2 / 3, (1 - 0.25 - 4 / 9) ** 0.5),
    }

    def embed(self, texts: object) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]  # type: ignore[attr-defined]

    def embed_query(self, text: str) -> list[float]:
        return [*self.PLACES[text.split(maxsplit=1)[0]], *([0.0] * (self.dim - 3))]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_clusters_do_not_chain(store: VectorStore) -> None:
    geometry = Geometry()
    report = ingest([mem("a", "alpha note"), mem("b", "beta note")], geometry, store)  # type: ignore[arg-type]
    later = ingest([mem("c", "gamma note")], geometry, store)  # type: ignore[arg-type]
    # b restates a; c restates b but not a: c is not pulled into a's cluster through b
    assert [r.cluster_id for r in (*report.results, *later.results)] == ["a", "a", "c"]


def captured(item_id: str, content: str, session: str) -> MemoryItem:
    from ctxbus.memory.model import CAPTURED_SOURCE, FileRef, Provenance

    return mem(
        item_id,
        content,
        source=CAPTURED_SOURCE,
        confidence=0.35,
        provenance=Provenance(session_id=session, hook_event="Stop", transcript_start=0, transcript_end=10),
        files=(FileRef(path="app/auth/reset.py", sha256="0" * 64),),
    )


def test_a_lesson_captured_again_strengthens_the_item_it_repeats(
    store: VectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    lesson = "TokenExpired in tests/test_reset.py: fixed in app/auth/reset.py (expiry compared in UTC)."
    ingest([captured("cap-1", lesson, "s1")], embedder, store)
    ingest([captured("cap-1", lesson, "s1")], embedder, store)  # the same session again (Stop, then SessionEnd)
    (once,) = store.get("acme", ["cap-1"])
    assert once.occurrences == 1
    report = ingest([captured("cap-1", lesson, "s2")], embedder, store)  # the same id from another session
    assert actions(report) == [("cap-1", "replaced", None)]
    report = ingest([captured("cap-9", "  " + lesson.upper(), "s3")], embedder, store)  # worded the same, other id
    assert actions(report) == [("cap-9", "merged", "cap-1")]
    (kept,) = store.get("acme", ["cap-1"])
    assert store.count("acme") == 1
    assert kept.occurrences == 3 and kept.confidence > 0.35
    assert kept.provenance is not None and kept.provenance.session_id == "s1"
    assert kept.files[0].path == "app/auth/reset.py"
