"""Task-aware retrieval through the real retriever (Qdrant Edge, the real embedder): task-type profiles,
domain detection and strict domains, on both store adapters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.api import Memory, QueryError
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import VectorStore
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def mem(item_id: str, kind: str, content: str, *, days_old: int = 200, **fields: object) -> MemoryItem:
    when = NOW - timedelta(days=days_old)
    values: dict[str, object] = {"id": item_id, "project": "acme", "kind": kind, "content": content}
    values.update({"domains": ("auth",), "created_at": when, "updated_at": when, "confidence": 0.8, **fields})
    return MemoryItem.model_validate(values)


#: Several kinds about one topic (refresh tokens), so what a task type wants decides the order.
CORPUS = [
    mem(
        "pattern",
        "pattern",
        "Refresh tokens rotate on every use; the refresh handler issues a new token and revokes the old one.",
        example_reference="src/auth/refresh.py",
    ),
    mem(
        "pattern-2",
        "pattern",
        "Refresh token families are stored per device so revoking one device keeps the others signed in.",
        example_reference="src/auth/families.py",
    ),
    mem(
        "learning",
        "learning",
        "Fixed refresh tokens failing after a deploy: the refresh handler read the old signing key.",
        outcome="successful",
        key_insight="Reload signing keys on deploy.",
        days_old=3,
    ),
    mem(
        "warning",
        "warning",
        "Refresh tokens expire during long uploads and the refresh handler then logs users out.",
        severity="high",
        mitigation="Refresh before starting an upload.",
        days_old=10,
    ),
    mem("principle", "principle", "Refresh tokens are validated at every API boundary, never trusted blindly."),
    mem("convention", "convention", "Refresh token handlers are named *_refresh and live in src/auth/."),
    mem("decision", "decision", "We chose opaque refresh tokens over JWT refresh tokens for revocation."),
    mem(
        "db-warning",
        "warning",
        "Adding a refresh_tokens column with a default locks the table; add it nullable and backfill.",
        domains=("database",),
    ),
    mem("db-convention", "convention", "Set pool_pre_ping=True on every SQLAlchemy engine.", domains=("database",)),
    mem(
        "global",
        "principle",
        "Never log refresh tokens or passwords.",
        project=GLOBAL_PROJECT,
        domains=("security",),
    ),
]
PROMPT = "how should the refresh token handler treat refresh tokens"


@pytest.fixture(params=["edge", "server"])
def memory(request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> Iterator[Memory]:
    settings = Settings(data_dir=tmp_path / "data")
    store: VectorStore
    if request.param == "edge":
        store = EdgeVectorStore(settings.store_dir, model_id=embedder.model_id, dim=embedder.dim)
    else:
        store = QdrantServerStore(QdrantClient(":memory:"), "memories", model_id=embedder.model_id, dim=embedder.dim)
    with Memory(settings, embedder, store) as m:
        assert m.add(CORPUS, allow_global=True).upserted == len(CORPUS)  # the corpus has a global item
        yield m


def ids(memory: Memory, task_type: str | None, k: int = len(CORPUS), **kw: object) -> list[str]:
    return [f.id for f in memory.search("acme", PROMPT, k=k, task_type=task_type, **kw).items]  # type: ignore[arg-type]


def test_the_same_prompt_gets_another_context_under_each_task_type(memory: Memory) -> None:
    types = ("feature", "bugfix", "refactor", "review", "explore", "general")
    orders = {t: ids(memory, t) for t in types}
    assert len({tuple(o) for o in orders.values()}) >= 4, orders
    # the task type orders what the ranking chose; it does not change which items make the cut
    chosen = {t: set(ids(memory, t, k=6)) for t in types}
    assert all(c == chosen["general"] for c in chosen.values()), chosen

    def place(task_type: str, item_id: str) -> int:
        order = orders[task_type]
        return order.index(item_id) if item_id in order else len(order)

    # what a task type wants moves up against the order of another type that does not want it
    assert place("bugfix", "learning") < place("feature", "learning")
    assert place("review", "principle") < place("feature", "principle")
    assert place("feature", "pattern-2") < place("bugfix", "pattern-2")
    top = {t: memory.search("acme", PROMPT, k=6, task_type=t).items[0] for t in ("bugfix", "general")}
    assert "task_factor" in top["bugfix"].breakdown and "task_factor" not in top["general"].breakdown
    # without the profiles every task type ranks as general
    off = Memory(
        memory.settings.model_copy(
            update={"injection": memory.settings.injection.model_copy(update={"task_profiles": False})}
        ),
        memory.embedder,
        memory.store,
        owns_store=False,
    )
    with off:
        plain = {t: [f.id for f in off.search("acme", PROMPT, k=len(CORPUS), task_type=t).items] for t in orders}
    assert all(o == plain["general"] == orders["general"] for o in plain.values())


def test_a_review_shows_no_example_files_a_feature_shows_them(memory: Memory) -> None:
    review = memory.prime("acme", "Review the refresh token handler", task_type="review")
    feature = memory.prime("acme", "Add refresh token rotation to the refresh handler", task_type="feature")
    assert review["patterns"] and all(p["example_file"] is None for p in review["patterns"])
    assert "src/auth/refresh.py" not in review["context"]
    assert {p["example_file"] for p in feature["patterns"]} >= {"src/auth/refresh.py"}


def test_a_domain_is_detected_from_the_prompt_and_files_when_none_is_given(memory: Memory) -> None:
    detected = memory.search("acme", "Rotate the JWT refresh token in src/auth/refresh.py", k=5)
    assert (detected.domain, detected.domain_source) == ("auth", "detected")
    assert all(f.breakdown["domain"] in (0.0, 1.0) for f in detected.items)
    given = memory.search("acme", "Rotate the JWT refresh token", k=5, domain="Database")
    assert (given.domain, given.domain_source) == ("database", "request")
    vague = memory.search("acme", "make it nicer", k=5)
    assert (vague.domain, vague.domain_source) == (None, None)


def test_a_strict_domain_keeps_to_it_and_an_empty_one_says_why(memory: Memory) -> None:
    soft = memory.search("acme", PROMPT, k=10, domain="database")
    assert {"pattern", "db-warning"} <= {f.id for f in soft.items}  # a soft domain only ranks
    strict = memory.search("acme", PROMPT, k=10, domain="database", strict_domain=True)
    assert strict.items and {f.id for f in strict.items} <= {"db-warning", "db-convention"}
    assert strict.domain == "database" and strict.domain_source == "request"
    empty = memory.search("acme", PROMPT, k=10, domain="payments", strict_domain=True)
    assert empty.items == () and empty.empty_reason == "no_memories_in_domain"
    doc = memory.prime("acme", "Add a refresh token column", domain="database", strict_domain=True)
    shown = {x["id"] for section in ("principles", "patterns", "learnings", "warnings") for x in doc[section]}
    assert shown and shown <= {"db-warning", "db-convention"}
    with pytest.raises(QueryError, match="strict_domain needs a domain"):
        memory.search("acme", PROMPT, strict_domain=True)
