"""Abstention through the real retriever (Qdrant Edge, the real embedder, the shipped labelled memories):
a prompt nothing in the store is about gets an empty context with its reason, a relevant one does not,
and meta prompts are answered without embedding or searching."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.api import Memory
from ctxbus.bench.retrieval import DATA_DIR, load_memories
from ctxbus.components import retriever_handler
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.task_profiles import SESSION_START_PROFILE
from ctxbus.hooks.requests import SESSION_START_PROMPT
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import Feedback, MemoryItem
from ctxbus.observability import Metrics
from ctxbus.ports import SearchHit, SearchQuery, Vector
from ctxbus.retriever.handler import RetrieverHandler
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

PROJECT = "web-dashboard"
#: null prompts of the shipped set (nothing in the store is about them) and graded queries of this project
NULLS = (
    "Write a bash script that backs up my dotfiles to a tarball",
    "Explain the difference between let, const and var",
    "How do I rename a git branch locally and on the remote?",
)
RELEVANT = (
    "Keep the refresh token in an httpOnly SameSite cookie in the BFF and rotate it on each refresh",
    "vi.useFakeTimers test hangs with useQuery retry",
    "hostname is not configured under images in your next.config.js",
)
META = (
    "<task-notification>\n<task-id>d03e7b1</task-id>\n<status>completed</status>\n"
    '<summary>Background command "pnpm playwright test e2e/refunds.spec.ts" completed (exit code 0)</summary>\n'
    "</task-notification>\nRead the output file to retrieve the result: /tmp/claude-1000/x/tasks/d03e7b1.output",
    "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args></command-args>",
    "<system-reminder>Background Bash 4f1a (command: pnpm test --watch) has new output.</system-reminder>",
    "Sounds good, go ahead.",
)


class CountingEmbedder:
    """The real embedder, counting the queries it embeds."""

    def __init__(self, inner: OnnxMiniLmEmbedder) -> None:
        self.inner = inner
        self.queries = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Vector:
        self.queries += 1
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


class CountingStore:
    """The real Qdrant Edge store, counting searches."""

    def __init__(self, inner: EdgeVectorStore) -> None:
        self.inner = inner
        self.searches = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def upsert(self, items: Sequence[MemoryItem], vectors: Sequence[Vector]) -> None:
        self.inner.upsert(items, vectors)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        self.searches += 1
        return self.inner.search(query)

    def get(self, project: str, item_ids: Sequence[str]) -> list[MemoryItem]:
        return self.inner.get(project, item_ids)

    def delete(self, project: str, item_ids: Sequence[str]) -> int:
        return self.inner.delete(project, item_ids)

    def set_feedback(self, project: str, feedback: Mapping[str, Feedback]) -> int:
        return self.inner.set_feedback(project, feedback)

    def set_pinned(self, project: str, item_ids: Sequence[str], pinned: bool) -> int:
        return self.inner.set_pinned(project, item_ids, pinned)

    def items(self, project: str | None = None) -> list[MemoryItem]:
        return self.inner.items(project)

    def count(self, project: str | None = None) -> int:
        return self.inner.count(project)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module")
def stored(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxMiniLmEmbedder
) -> Iterator[tuple[Settings, EdgeVectorStore]]:
    """The labelled set's web-dashboard and global memories in a fresh embedded store."""
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("abstain")))
    store = EdgeVectorStore(settings.store_dir, model_id=embedder.model_id, dim=embedder.dim)
    items = [m for m in load_memories(DATA_DIR / "memories.jsonl") if m.project in (PROJECT, "__global__")]
    ingest(items, embedder, store, near_duplicate=None)
    yield settings, store
    store.close()


@pytest.fixture
def spied(
    stored: tuple[Settings, EdgeVectorStore], embedder: OnnxMiniLmEmbedder
) -> tuple[RetrieverHandler, CountingEmbedder, CountingStore]:
    settings, store = stored
    counting_embedder, counting_store = CountingEmbedder(embedder), CountingStore(store)
    handler = retriever_handler(settings, counting_embedder, counting_store, Topics("ctxbus"), Metrics())
    return handler, counting_embedder, counting_store


async def complete(
    handler: RetrieverHandler, prompt: str, trigger: Trigger = Trigger.USER_PROMPT
) -> RetrievalCompleted:
    request = RetrievalRequested(agent_name="claude-code", prompt=prompt, trigger=trigger, max_items=5)
    (output,) = await handler(Envelope.root(request, project=PROJECT, session_id="s-1", producer="test"))
    completed: RetrievalCompleted = output.event.payload
    return completed


@pytest.mark.parametrize("prompt", NULLS)
async def test_a_prompt_nothing_is_about_gets_an_empty_context_with_the_reason(
    spied: tuple[RetrieverHandler, CountingEmbedder, CountingStore], prompt: str
) -> None:
    handler, _, store = spied
    completed = await complete(handler, prompt)
    assert completed.items == () and completed.empty_reason == "nothing_relevant_enough"
    assert completed.candidates_considered > 0 and store.searches >= 1  # (a task type's prefetch may add a second)
    (why,) = [n for n in completed.notices if n.startswith("nothing_relevant_enough")]
    assert "relevance" in why and "best cosine" in why and "best candidate" in why


@pytest.mark.parametrize("prompt", RELEVANT)
async def test_a_relevant_prompt_gets_its_items_with_the_floor_in_their_breakdown(
    spied: tuple[RetrieverHandler, CountingEmbedder, CountingStore], prompt: str
) -> None:
    handler, _, _ = spied
    completed = await complete(handler, prompt)
    assert completed.items and completed.empty_reason is None
    for item in completed.items:
        assert item.breakdown["relevance"] >= item.breakdown["min_relevance"]
        assert {"relevance_best", "relevance_margin", "relevance_keyword"} <= set(item.breakdown)


@pytest.mark.parametrize("prompt", META)
async def test_meta_prompts_get_an_empty_context_without_embedding_or_search(
    spied: tuple[RetrieverHandler, CountingEmbedder, CountingStore], prompt: str
) -> None:
    handler, embedder, store = spied
    completed = await complete(handler, prompt)
    assert completed.items == () and completed.empty_reason == "meta_prompt"
    assert embedder.queries == 0 and store.searches == 0
    assert completed.notices and completed.notices[0].startswith("meta_prompt: ")


async def test_a_session_start_is_not_judged_and_other_triggers_do_not_take_meta_prompts(
    spied: tuple[RetrieverHandler, CountingEmbedder, CountingStore],
) -> None:
    handler, _, store = spied
    start = await complete(handler, SESSION_START_PROMPT, Trigger.SESSION_START)
    assert start.items and not any(n.startswith("nothing_relevant_enough") for n in start.notices)
    # no task yet: the project's rules first (principles, conventions, decisions, patterns, warnings), in that order
    wanted = [item.kind in SESSION_START_PROFILE.wanted_kinds for item in start.items]
    assert wanted[0] and wanted == sorted(wanted, reverse=True)
    # a gap request's query is written by ctxbus, never a chat acknowledgement: it is searched (and judged)
    gap = await complete(handler, "ok", Trigger.GAP)
    assert gap.empty_reason != "meta_prompt" and store.searches >= 2  # both searched (a prefetch may add more)


def test_ranked_search_shows_the_ranking_and_abstains_only_when_asked(
    stored: tuple[Settings, EdgeVectorStore], embedder: OnnxMiniLmEmbedder
) -> None:
    settings, store = stored
    memory = Memory(settings, embedder, store, owns_store=False)
    try:
        assert memory.search(PROJECT, NULLS[0], k=5).items  # search results: the best there is
        assert memory.search(PROJECT, NULLS[0], k=5, abstain=True).items == ()
        assert memory.search(PROJECT, RELEVANT[0], k=5, abstain=True).items
        assert memory.search(PROJECT, "thanks!", k=5, abstain=True).items == ()
        doc = memory.prime(PROJECT, NULLS[1])  # the injection path abstains
        assert doc["context"] == "" and doc["empty_reason"] == "nothing_relevant_enough"
    finally:
        memory.close()
