"""Ingestion without pile-up: exact and near duplicates update the existing item; supersedes retires items."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.memory.ingest import DEFAULT_NEAR_DUPLICATE, ingest
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchQuery

pytestmark = pytest.mark.integration


def mem(item_id: str, content: str, project: str = "acme", **fields: object) -> MemoryItem:
    return MemoryItem.model_validate(
        {"id": item_id, "project": project, "kind": "learning", "content": content, **fields}
    )


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> Iterator[EdgeVectorStore]:
    with EdgeVectorStore(tmp_path / "store", model_id=embedder.model_id, dim=embedder.dim) as s:
        yield s


MIGRATION = "Always run database schema migrations inside a single transaction so a failure rolls back cleanly."
MIGRATION_AGAIN = (
    "Always run the database schema migrations inside one transaction, so that a failure rolls back cleanly."
)
POOL_READS = "Use a connection pool of 20 for the read replicas."
POOL_WRITES = "Use a connection pool of 5 for the primary database writes."


def test_an_exact_duplicate_under_another_id_updates_the_existing_item(
    store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder
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
    assert report.upserted == 0 and [(m.incoming_id, m.existing_id, m.exact) for m in report.merged] == [
        ("m2", "m1", True)
    ]
    assert store.count("acme") == 1
    (kept,) = store.get("acme", ["m1"])
    assert kept.confidence == 0.8 and kept.tags == ("db", "migrations")


def test_a_near_duplicate_is_merged_and_a_different_fact_on_the_same_topic_is_not(
    store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    ingest([mem("m1", MIGRATION), mem("p1", POOL_READS)], embedder, store)
    report = ingest([mem("m2", MIGRATION_AGAIN), mem("p2", POOL_WRITES)], embedder, store)
    assert [(m.incoming_id, m.existing_id, m.exact) for m in report.merged] == [("m2", "m1", False)]
    assert DEFAULT_NEAR_DUPLICATE <= report.merged[0].similarity < 1.0
    assert report.upserted == 1 and store.count("acme") == 3
    assert store.get("acme", ["m1"])[0].content == MIGRATION_AGAIN  # the newer wording


def test_duplicates_in_other_projects_or_kinds_and_merging_off_stay_separate(
    store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    ingest([mem("m1", MIGRATION)], embedder, store)
    ingest([mem("m1", MIGRATION, project="other"), mem("w1", MIGRATION, kind="warning")], embedder, store)
    ingest([mem("m9", MIGRATION)], embedder, store, near_duplicate=None)
    assert (store.count("acme"), store.count("other")) == (3, 1)


def test_duplicates_within_one_batch_are_merged_and_same_id_replaces(
    store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder
) -> None:
    report = ingest(
        [mem("m1", MIGRATION), mem("m2", MIGRATION_AGAIN), mem("m1", MIGRATION, importance=0.9)], embedder, store
    )
    assert store.count("acme") == 1
    assert [(m.incoming_id, m.existing_id) for m in report.merged] == [("m2", "m1")]
    (kept,) = store.get("acme", ["m1"])
    assert kept.importance == 0.9 and kept.content == MIGRATION


def test_supersedes_retires_the_old_item_but_keeps_it(store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder) -> None:
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


def test_bad_threshold_is_refused(store: EdgeVectorStore, embedder: OnnxMiniLmEmbedder) -> None:
    with pytest.raises(ValueError, match="near_duplicate"):
        ingest([mem("m1", MIGRATION)], embedder, store, near_duplicate=1.5)
