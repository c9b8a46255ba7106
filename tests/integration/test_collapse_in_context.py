"""Near copies on the real embedder and Qdrant Edge: all kept and all found by search; an injected context shows
one of them, names the others in its ``collapsed_ids`` and gives the places to distinct memories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.api import Memory
from ctxbus.components import open_store, retriever_handler
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem
from ctxbus.observability import Metrics
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

COPIES = [
    "Always run database schema migrations inside a single transaction so a failure rolls back cleanly.",
    "Always run the database schema migrations inside one transaction, so that a failure rolls back cleanly.",
    "Run database schema migrations inside a single transaction so that any failure rolls back cleanly.",
]
OTHERS = [
    "Test each database schema migration against a copy of production data first.",
    "Review schema migration scripts for ALTER TABLE statements that lock large tables.",
    "Keep every database migration script reversible with a tested down migration.",
]


@pytest.fixture
def memory(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> Iterator[Memory]:
    settings = Settings(data_dir=tmp_path / "data")
    with Memory(settings, embedder, open_store(settings, embedder)) as m:
        items = [
            MemoryItem(id=f"copy{n}", project="db", kind="learning", content=text) for n, text in enumerate(COPIES)
        ] + [MemoryItem(id=f"other{n}", project="db", kind="learning", content=text) for n, text in enumerate(OTHERS)]
        report = ingest(items, embedder, m.store)
        assert [r.cluster_id for r in report.results] == ["copy0", "copy0", "copy0", "other0", "other1", "other2"]
        yield m


PROMPT = "How do we run database schema migrations safely?"


async def test_the_completed_event_keeps_one_of_a_cluster_and_names_the_others(
    memory: Memory, embedder: OnnxMiniLmEmbedder
) -> None:
    retriever = retriever_handler(memory.settings, embedder, memory.store, Topics(), Metrics())
    request = RetrievalRequested(agent_name="t", prompt=PROMPT, trigger=Trigger.USER_PROMPT, max_items=4)
    (out,) = await retriever(Envelope.root(request, project="db", session_id="s", producer="t"))
    completed: RetrievalCompleted = out.event.payload  # type: ignore[assignment]
    ids = [i.id for i in completed.items]
    copies = [i for i in completed.items if i.cluster_id == "copy0"]
    assert len(copies) == 1 and sorted((copies[0].id, *copies[0].collapsed_ids)) == ["copy0", "copy1", "copy2"]
    assert sorted(ids) == sorted([copies[0].id, "other0", "other1", "other2"])  # the places go to distinct memories
    assert all(i.collapsed_ids == () for i in completed.items if i.cluster_id != "copy0")


def test_search_results_list_every_near_copy_and_prime_shows_one(memory: Memory) -> None:
    found = memory.search("db", PROMPT, k=6)
    assert {f.id for f in found.items} == {"copy0", "copy1", "copy2", "other0", "other1", "other2"}
    for n, text in enumerate(COPIES):  # each copy first by its own text
        assert memory.search("db", text, k=1).items[0].id == f"copy{n}"
    document = memory.prime("db", PROMPT, max_items=4)
    assert sum(document["context"].count(text) for text in COPIES) == 1
    assert all(text in document["context"] for text in OTHERS)
