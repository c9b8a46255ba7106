"""The behaviour every ``VectorStore`` adapter must have, written once.

``StoreBehaviour`` is not collected by itself (its name does not start with ``Test``): each adapter's
test module subclasses it and provides a ``store`` fixture (an empty store of that adapter).
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import GLOBAL_PROJECT, Feedback, MemoryItem, MemoryKind, Outcome
from ctxbus.ports import SearchMode, SearchQuery, VectorStore

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def mem(item_id: str, project: str, content: str, **fields: object) -> MemoryItem:
    values: dict[str, object] = {"id": item_id, "project": project, "kind": "pattern", "content": content}
    values.update({"created_at": T0, "updated_at": T0, **fields})
    return MemoryItem.model_validate(values)


CORPUS = [
    mem(
        "reset",
        "acme",
        "Password reset must revoke refresh tokens before the next login",
        title="Revoke tokens on reset",
        domains=("Auth", "security"),
        tags=("tokens",),
        confidence=0.9,
        importance=0.8,
        usage_count=3,
        success_rate=0.75,
        example_reference="src/auth/reset.py:42",
        outcome=Outcome.SUCCESSFUL,
        source="retro 2026-01",
    ),
    mem("ratelimit", "acme", "Rate limit login attempts per account", domains=("auth",), confidence=0.6),
    mem("migr", "acme", "Add nullable columns first, then backfill", kind="warning", domains=("database",)),
    mem("adr", "acme", "We chose Postgres over MySQL for JSON support", kind="decision", domains=("database",)),
    mem("secret", "other", "Password reset in this project uses the legacy SSO bridge", domains=("auth",)),
    mem("global-tip", GLOBAL_PROJECT, "Never log passwords or reset tokens", domains=("auth",), confidence=0.7),
]


def ids(store: VectorStore, embedder: OnnxMiniLmEmbedder, text: str, project: str, **kw: object) -> list[str]:
    query = SearchQuery(vector=embedder.embed_query(text), project=project, limit=kw.pop("limit", 20), **kw)  # type: ignore[arg-type]
    return [hit.item.id for hit in store.search(query)]


class StoreBehaviour:
    """Shared cases; subclasses provide the ``store`` fixture."""

    @pytest.fixture
    def filled(self, store: VectorStore, embedder: OnnxMiniLmEmbedder) -> VectorStore:
        ingest(CORPUS, embedder, store)
        return store

    def test_search_sees_the_project_and_the_global_scope_only(
        self, filled: VectorStore, embedder: OnnxMiniLmEmbedder
    ) -> None:
        found = ids(filled, embedder, "revoke refresh tokens after a password reset", "acme")
        assert found[0] == "reset"
        assert set(found) == {"reset", "ratelimit", "migr", "adr", "global-tip"}
        assert "global-tip" not in ids(filled, embedder, "password", "acme", include_global=False)
        assert ids(filled, embedder, "legacy SSO bridge", "other") == ["secret", "global-tip"]
        assert ids(filled, embedder, "password", "nobody") == ["global-tip"]
        assert ids(filled, embedder, "password", "nobody", include_global=False) == []
        assert ids(filled, embedder, "password", GLOBAL_PROJECT) == ["global-tip"]

    def test_filters_kinds_exclusions_domain_and_confidence(
        self, filled: VectorStore, embedder: OnnxMiniLmEmbedder
    ) -> None:
        def found(**kw: object) -> set[str]:
            return set(ids(filled, embedder, "login and databases", "acme", **kw))

        assert found(kinds=[MemoryKind.WARNING]) == {"migr"}
        assert found(kinds=[MemoryKind.WARNING, MemoryKind.DECISION]) == {"migr", "adr"}
        assert found(kinds=[]) == found()  # empty: any kind
        assert found(exclude_kinds=[MemoryKind.PATTERN]) == {"migr", "adr"}
        assert found(domain="database") == {"migr", "adr"}
        assert found(domain=" AUTH ") == {"reset", "ratelimit", "global-tip"}  # normalised like item domains
        assert found(domain="security") == {"reset"}
        assert found(min_confidence=0.7) == {"reset", "global-tip"}  # inclusive bound
        assert found(min_confidence=0.7, include_global=False) == {"reset"}
        assert found(domain="auth", exclude_kinds=[MemoryKind.PATTERN]) == set()
        assert found(domain="database", kinds=[MemoryKind.DECISION], min_confidence=0.5) == {"adr"}

    def test_hits_are_best_first_with_cosine_scores(self, filled: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
        vector = embedder.embed_query("how should a password reset treat refresh tokens")
        hits = filled.search(SearchQuery(vector=vector, project="acme", limit=3))
        assert len(hits) == 3
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        expected = embedder.embed_query(CORPUS[0].embedding_text())
        assert hits[0].item.id == "reset"
        assert hits[0].score == pytest.approx(float(np.dot(vector, expected)), abs=1e-4)
        assert filled.search(SearchQuery(vector=vector, project="acme", limit=0)) == []

    def test_items_round_trip_whole(self, filled: VectorStore) -> None:
        got = filled.get("acme", ["migr", "missing", "reset", "migr"])
        assert got == [CORPUS[2], CORPUS[0]]  # asked order, missing left out, no duplicates
        assert got[1].created_at == T0 and got[1].domains == ("auth", "security")
        assert filled.get("other", ["reset"]) == []  # ids are per project
        assert filled.get("acme", []) == []

    def test_upsert_replaces_delete_and_count(self, filled: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
        assert (filled.count(), filled.count("acme"), filled.count(GLOBAL_PROJECT)) == (6, 4, 1)
        newer = CORPUS[0].model_copy(update={"content": "Revoke every session on reset", "confidence": 0.5})
        ingest([newer], embedder, filled)
        assert filled.count("acme") == 4
        assert filled.get("acme", ["reset"]) == [newer]
        assert ids(filled, embedder, "revoke sessions", "acme", min_confidence=0.85) == []
        assert filled.delete("acme", ["reset", "missing", "reset"]) == 1
        assert filled.delete("acme", ["reset"]) == 0
        assert filled.delete("acme", []) == 0
        assert (filled.count(), filled.count("acme"), filled.count("nobody")) == (5, 3, 0)
        assert "reset" not in ids(filled, embedder, "password reset", "acme")

    def test_searches_see_every_write_at_once(self, filled: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
        """A search right after a feedback change, a replacement or a deletion returns the written state (an
        adapter that keeps parsed items must forget the ones it wrote), in every mode and through ``get``."""

        def found(text: str, mode: SearchMode = SearchMode.HYBRID) -> dict[str, MemoryItem]:
            query = SearchQuery(vector=embedder.embed_query(text), project="acme", text=text, mode=mode, limit=20)
            return {hit.item.id: hit.item for hit in filled.search(query)}

        modes = (SearchMode.HYBRID, SearchMode.DENSE, SearchMode.SPARSE)
        for mode in modes:  # seen once: kept by an adapter that keeps items
            assert found("password reset refresh tokens", mode)["reset"] == CORPUS[0]
        learned = Feedback(uses=4, successes=3, failures=1)
        assert filled.set_feedback("acme", {"reset": learned}) == 1
        for mode in modes:
            assert found("password reset refresh tokens", mode)["reset"].feedback == learned
        assert filled.get("acme", ["reset"])[0].feedback == learned
        newer = CORPUS[0].model_copy(update={"content": "Password reset revokes refresh tokens and sessions"})
        ingest([newer], embedder, filled)
        for mode in modes:
            assert found("password reset refresh tokens", mode)["reset"].content == newer.content
        assert filled.delete("acme", ["reset"]) == 1
        for mode in modes:
            assert "reset" not in found("password reset refresh tokens", mode)
        assert filled.get("acme", ["reset"]) == []

    def test_exact_text_filter_and_cluster_ids_round_trip(
        self, store: VectorStore, embedder: OnnxMiniLmEmbedder
    ) -> None:
        items = [
            mem("a", "acme", "Rotate refresh tokens on every use"),
            mem("b", "acme", "  ROTATE refresh tokens   on every use", cluster_id="a"),
            mem("c", "acme", "Rotate refresh tokens on every use, and revoke the old ones", cluster_id="a"),
            mem("d", "other", "Rotate refresh tokens on every use"),
        ]
        store.upsert(items, embedder.embed([i.embedding_text() for i in items]))
        same_text = ids(store, embedder, "refresh tokens", "acme", content_hash=items[0].content_hash)
        assert sorted(same_text) == ["a", "b"]  # same normalised text, this project only
        assert store.get("acme", ["a", "b", "c"]) == items[:3]
        assert [i.cluster for i in store.get("acme", ["a", "b", "c"])] == ["a", "a", "a"]

    def test_wrong_vectors_are_refused(self, store: VectorStore) -> None:
        with pytest.raises(ValueError, match="1 items but 0 vectors"):
            store.upsert(CORPUS[:1], [])
        with pytest.raises(ValueError, match="3 dimensions"):
            store.upsert(CORPUS[:1], [[0.1, 0.2, 0.3]])
        with pytest.raises(ValueError, match="2 dimensions"):
            store.search(SearchQuery(vector=[1.0, 0.0], project="acme"))
        store.upsert([], [])
        assert store.count() == 0

    def test_keyword_half_finds_exact_identifiers_and_hybrid_fuses_both(
        self, filled: VectorStore, embedder: OnnxMiniLmEmbedder
    ) -> None:
        extra = mem(
            "pollcfg",
            "acme",
            "Set max_poll_records=50 in consumer.properties when handlers are slow",
            kind="convention",
            domains=("messaging",),
        )
        ingest([extra], embedder, filled)
        text = "max_poll_records"
        vector = embedder.embed_query(text)

        def search(mode: SearchMode) -> list[tuple[str, dict[str, float]]]:
            hits = filled.search(SearchQuery(vector=vector, project="acme", text=text, mode=mode, limit=10))
            return [(h.item.id, h.extra) for h in hits]

        sparse = search(SearchMode.SPARSE)
        assert [i for i, _ in sparse] == ["pollcfg"]  # only items holding the term
        assert sparse[0][1]["bm25"] > 0 and sparse[0][1]["sparse_rank"] == 1 and sparse[0][1]["dense_rank"] == 0
        dense = search(SearchMode.DENSE)
        assert all(e["bm25"] == 0 and e["sparse_rank"] == 0 for _, e in dense)
        hybrid = search(SearchMode.HYBRID)
        assert hybrid[0][0] == "pollcfg"
        assert hybrid[0][1]["dense_rank"] >= 1 and hybrid[0][1]["sparse_rank"] == 1
        assert {i for i, _ in hybrid} == {i for i, _ in dense} | {i for i, _ in sparse}
        # the cosine of a lexically found item is the real cosine, whichever half found it
        expected = float(np.dot(vector, embedder.embed_query(extra.embedding_text())))
        assert next(
            h for h in filled.search(SearchQuery(vector=vector, project="acme", text=text, mode=SearchMode.SPARSE))
        ).score == pytest.approx(expected, abs=1e-3)
        # a query with no keyword terms (stop words only) is dense only
        blank = filled.search(SearchQuery(vector=vector, project="acme", text="the of and", mode=SearchMode.SPARSE))
        assert [h.item.id for h in blank] == [i for i, _ in dense]
        # the keyword half keeps to the scope too
        assert (
            filled.search(
                SearchQuery(vector=vector, project="other", text=text, mode=SearchMode.SPARSE, include_global=False)
            )
            == []
        )

    def test_superseded_items_are_kept_but_never_found_and_importance_filters(
        self, filled: VectorStore, embedder: OnnxMiniLmEmbedder
    ) -> None:
        retired = CORPUS[1].model_copy(update={"superseded_by": "ratelimit-v2"})
        ingest([retired], embedder, filled)
        query = "rate limit login attempts"
        assert "ratelimit" not in ids(filled, embedder, query, "acme", mode=SearchMode.DENSE)
        assert "ratelimit" not in [
            h.item.id
            for h in filled.search(
                SearchQuery(vector=embedder.embed_query(query), project="acme", text=query, mode=SearchMode.SPARSE)
            )
        ]
        assert filled.get("acme", ["ratelimit"]) == [retired]
        assert set(ids(filled, embedder, "password reset", "acme", min_importance=0.8)) == {"reset"}

    def test_a_strict_domain_filters_every_search_mode(self, filled: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
        """``SearchQuery.domain`` (a request's strict domain) holds for the dense and the keyword half alike."""
        text = "password reset tokens and database columns"
        vector = embedder.embed_query(text)

        def found(mode: SearchMode, domain: str | None) -> set[str]:
            query = SearchQuery(vector=vector, project="acme", text=text, mode=mode, limit=20, domain=domain)
            return {h.item.id for h in filled.search(query)}

        for mode in SearchMode:
            assert found(mode, None) >= {"reset", "migr"}, mode
            assert found(mode, "database") <= {"migr", "adr"} and "migr" in found(mode, "database"), mode
            assert found(mode, "Security") == {"reset"}, mode  # an item of several domains is in each
            assert found(mode, "payments") == set(), mode  # a domain no item carries: nothing, not everything

    def test_listing_a_scope_and_pinning(self, filled: VectorStore, embedder: OnnxMiniLmEmbedder) -> None:
        """``items`` lists one scope whole (by id), or every project; a pin is set in place, seen by ``get``,
        ``items`` and searches at once, survives a re-import of the item, and unknown ids are not counted."""
        assert [i.id for i in filled.items("acme")] == ["adr", "migr", "ratelimit", "reset"]
        assert filled.items("acme")[3] == CORPUS[0]
        assert [(i.project, i.id) for i in filled.items()][:1] == [(GLOBAL_PROJECT, "global-tip")]
        assert len(filled.items()) == 6 and filled.items("nobody") == []
        assert filled.set_pinned("acme", ["reset", "missing"], True) == 1
        assert filled.set_pinned("other", ["reset"], True) == 0  # ids are per project
        assert filled.get("acme", ["reset"])[0].pinned
        assert [i.id for i in filled.items("acme") if i.pinned] == ["reset"]
        hits = filled.search(SearchQuery(vector=embedder.embed_query("password reset"), project="acme", limit=3))
        assert next(h.item for h in hits if h.item.id == "reset").pinned
        ingest([CORPUS[0].model_copy(update={"content": "Revoke refresh tokens on every reset"})], embedder, filled)
        assert filled.get("acme", ["reset"])[0].pinned  # a person's pin outlives a re-import
        assert filled.set_pinned("acme", ["reset"], False) == 1
        assert not filled.get("acme", ["reset"])[0].pinned
