"""ctxbus as a library: open a store, add memories, search, prime. The services' own code paths.

::

    from ctxbus.api import Memory

    with Memory.open() as memory:                      # settings from CTXBUS_* (embedded store by default)
        memory.add_file("memories.jsonl", project="payments")
        result = memory.search("payments", "rotate refresh tokens", k=5)
        for found in result.items:
            print(found.id, found.score)
        doc = memory.prime("payments", "Add refresh-token rotation", task_type="feature", domain="auth")
        print(doc["suggested_approach"])
        memory.record_outcome("payments", "successful", session_id="s-42")   # how the session went

``search`` modes: ``ranked`` (default: the retriever's full path: task classification, the agent
profile's policy, hybrid search, ranking; the score is the ranking's and ``breakdown`` explains it),
``hybrid`` (the store's fused candidates; score = reciprocal-rank fusion), ``dense`` (cosine) and
``sparse`` (BM25). ``prime`` returns seed 001's prime_context document, built by the injector's
code. ``record_outcome`` records how a session or a task went: through the bus when there is one,
else applied to this store at once (:mod:`ctxbus.learning.record`). ``list``, ``get``, ``forget``, ``pin`` and
``unpin`` see and steer the memory (:mod:`ctxbus.api_steering`, docs/memory.md). A Memory opened here owns the
embedded store (another process holding it raises :class:`~ctxbus.ports.StoreBusy`); with
``CTXBUS_QDRANT_URL`` set it talks to that server instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ctxbus.api_steering import ForgottenRefused, Steering
from ctxbus.components import injector_handler, open_embedder, open_store, retriever_handler
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    SECTIONS,
    ContextInjected,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)
from ctxbus.contract.topics import Topics
from ctxbus.core.bounds import embed_chars, prefix
from ctxbus.core.queries import MAX_K, MODES, Found, QueryError, SearchResult, check_project, check_query
from ctxbus.memory import global_scope
from ctxbus.memory.ingest import IngestReport, ingest
from ctxbus.memory.jsonl_file import parse_jsonl
from ctxbus.memory.model import MemoryItem
from ctxbus.memory.parse_result import LineError
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchHit, SearchMode, SearchQuery, VectorStore
from ctxbus.retriever.query import window_notices
from ctxbus.settings import Settings

__all__ = [
    "MAX_K",
    "MAX_LIBRARY_THREADS",
    "MODES",
    "ForgottenRefused",
    "Found",
    "Memory",
    "QueryError",
    "SearchResult",
    "library_embedder_settings",
]

PRODUCER = "api"
T = TypeVar("T")


#: Most onnxruntime threads a library caller's embedder takes by default.
MAX_LIBRARY_THREADS = 4


def library_embedder_settings(settings: Settings) -> Settings:
    """The settings a library or CLI process embeds with: every core (up to MAX_LIBRARY_THREADS) unless
    ``CTXBUS_EMBEDDER_THREADS`` says otherwise. The services keep one thread by default, because there the
    broker and the other stages need the other core; a script or ``ctxbus search`` has the machine to itself."""
    if "threads" in settings.embedder.model_fields_set:
        return settings
    threads = max(1, min(MAX_LIBRARY_THREADS, os.cpu_count() or 1))
    return settings.model_copy(update={"embedder": settings.embedder.model_copy(update={"threads": threads})})


class Memory(Steering):
    """One project-scoped memory store with the embedder that fills and searches it (outcomes, listing, forgetting
    and pinning: :class:`~ctxbus.api_steering.Steering`)."""

    def __init__(self, settings: Settings, embedder: Embedder, store: VectorStore, *, owns_store: bool = True) -> None:
        self.settings = settings
        self.embedder = embedder
        self.store = store
        self._owns_store = owns_store
        topics = Topics(settings.topic_prefix)
        metrics = Metrics()  # a private registry: library calls do not touch a service's metrics
        self._retriever = retriever_handler(settings, embedder, store, topics, metrics)
        #: search results list every near copy: collapsing them is for injected contexts (``prime``) only
        self._searcher = self._retriever.searching()
        #: one event loop for the synchronous calls (a fresh loop and thread pool per call cost ~1 ms)
        self._runner: asyncio.Runner | None = None
        self._injector = injector_handler(settings, topics, metrics, embedder=embedder)

    @classmethod
    def open(cls, settings: Settings | None = None) -> Memory:
        """Load the embedder and open the configured store (raises StoreBusy, StoreModelMismatch)."""
        settings = settings or Settings()
        embedder = open_embedder(library_embedder_settings(settings))
        return cls(settings, embedder, open_store(settings, embedder))

    # -- adding ---------------------------------------------------------------------------------------------

    def add(
        self, items: Iterable[MemoryItem], *, allow_global: bool = False, allow_forgotten: bool = False
    ) -> IngestReport:
        """Embed and store items (exact duplicates merge, near copies are kept and clustered, ``supersedes``
        retires; see ctxbus.memory.ingest). Items of the global scope (read by every project) need
        ``allow_global=True``: without it :class:`~ctxbus.memory.global_scope.GlobalWriteRefused` is raised and
        nothing is written. A forgotten item (:meth:`forget`) comes back only with ``allow_forgotten=True``;
        without it :class:`~ctxbus.api_steering.ForgottenRefused` is raised and nothing is written."""
        batch = list(items)
        global_scope.check_allowed(batch, allow_global)
        self.check_forgotten(batch, allow_forgotten)
        return ingest(batch, self.embedder, self.store)

    def add_file(
        self, path: str | Path, *, project: str, allow_global: bool = False, allow_forgotten: bool = False
    ) -> tuple[IngestReport, list[LineError]]:
        """A JSON-lines file of memory items: the good lines are stored, the bad ones returned with reasons
        (``allow_global``, ``allow_forgotten``: as in :meth:`add`)."""
        parsed = parse_jsonl(Path(path), project=project)
        report = self.add(parsed.items, allow_global=allow_global, allow_forgotten=allow_forgotten)
        return report, list(parsed.errors)

    def count(self, project: str | None = None) -> int:
        """How many items ``project``'s own scope holds (not the global scope's), or the whole store's (None)."""
        return self.store.count(project)

    # -- searching ------------------------------------------------------------------------------------------

    def _window(self, query: str) -> tuple[bool, int, str | None]:
        notices = window_notices(self.embedder, query)
        # counted on what the embedder reads at most (a long query is not tokenized whole)
        tokens = self.embedder.count_tokens(prefix(query, embed_chars(self.embedder.max_tokens))) if notices else 0
        return bool(notices), tokens, notices[0] if notices else None

    def search(
        self,
        project: str,
        query: str,
        *,
        k: int = 10,
        mode: str = "ranked",
        domain: str | None = None,
        agent_role: str = "implementer",
        task_type: str | None = None,
        strict_domain: bool = False,
        abstain: bool = False,
    ) -> SearchResult:
        """The best ``k`` items of ``project`` (and the global scope) for ``query``, best first.

        In ranked mode ``domain`` is a ranking signal (a domain is detected when none is given) and
        ``strict_domain=True`` makes it a filter; in the other modes a ``domain`` is always a filter.
        ``abstain`` (ranked mode): apply the injection path's relevance floor and meta-prompt recognition,
        so the result is what would be injected (empty when the retriever would abstain).
        """
        return self._sync(
            self.asearch(
                project,
                query,
                k=k,
                mode=mode,
                domain=domain,
                agent_role=agent_role,
                task_type=task_type,
                strict_domain=strict_domain,
                abstain=abstain,
            )
        )

    async def asearch(
        self,
        project: str,
        query: str,
        *,
        k: int = 10,
        mode: str = "ranked",
        domain: str | None = None,
        agent_role: str = "implementer",
        task_type: str | None = None,
        strict_domain: bool = False,
        abstain: bool = False,
    ) -> SearchResult:
        """:meth:`search` for callers that already run an event loop (the store work runs in a thread)."""
        check_project(project)
        check_query(query, k, mode)
        started = time.perf_counter()
        truncated, tokens, notice = self._window(query)
        facts: dict[str, Any] = {}
        if mode == "ranked":
            request = self._request(query, k, domain, agent_role, task_type, strict_domain)
            completed = await self._search(project, request, abstain=abstain)
            facts = {
                "domain": completed.domain,
                "domain_source": completed.domain_source,
                "task_type": completed.task_type.value if completed.task_type else None,
                "empty_reason": completed.empty_reason,
            }
            # the completed event lists items in assembly order (seed 004's head and tail first); a search is best first
            best_first = sorted(completed.items, key=lambda i: (-i.score, i.id, i.project))
            found = tuple(
                Found(i.id, i.project, i.kind, i.score, dict(i.breakdown), i.title, i.content) for i in best_first
            )
        else:
            hits = await asyncio.to_thread(self._store_search, project, query, k, SearchMode(mode), domain)
            key = {"hybrid": "rrf", "sparse": "bm25"}.get(mode)
            found = tuple(
                Found(
                    h.item.id,
                    h.item.project,
                    h.item.kind.value,
                    round(h.extra[key] if key else h.score, 6),
                    {"cosine": h.score, **h.extra},
                    h.item.title,
                    h.item.content,
                )
                for h in hits
            )
        ms = (time.perf_counter() - started) * 1000.0
        return SearchResult(found, round(ms, 3), truncated, tokens, notice, **facts)

    def _store_search(self, project: str, query: str, k: int, mode: SearchMode, domain: str | None) -> list[SearchHit]:
        vector = self.embedder.embed_query(query)
        return self.store.search(
            SearchQuery(vector=vector, project=project, text=query, mode=mode, limit=k, domain=domain)
        )

    # -- priming --------------------------------------------------------------------------------------------

    def prime(
        self,
        project: str,
        description: str,
        *,
        task_type: str | None = None,
        domain: str | None = None,
        include: Mapping[str, bool] | None = None,
        max_tokens: int = 2_000,
        max_chars: int = 10_000,
        max_items: int = 10,
        agent_role: str = "implementer",
        session_id: str | None = None,
        strict_domain: bool = False,
    ) -> dict[str, Any]:
        """Seed 001's prime_context: the assembled context for a task, as its JSON document
        (``strict_domain=True``: only items of ``domain``)."""
        return self._sync(
            self.aprime(
                project,
                description,
                task_type=task_type,
                domain=domain,
                include=include,
                max_tokens=max_tokens,
                max_chars=max_chars,
                max_items=max_items,
                agent_role=agent_role,
                session_id=session_id,
                strict_domain=strict_domain,
            )
        )

    async def aprime(
        self,
        project: str,
        description: str,
        *,
        task_type: str | None = None,
        domain: str | None = None,
        include: Mapping[str, bool] | None = None,
        max_tokens: int = 2_000,
        max_chars: int = 10_000,
        max_items: int = 10,
        agent_role: str = "implementer",
        session_id: str | None = None,
        strict_domain: bool = False,
    ) -> dict[str, Any]:
        """:meth:`prime` for callers that already run an event loop."""
        check_project(project)
        if not description or not description.strip():
            raise QueryError("the task description is empty or blank")
        unknown = sorted(set(include or {}) - set(SECTIONS))
        if unknown:
            raise QueryError(f"unknown include section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
        request = self._request(description, max_items, domain, agent_role, task_type, strict_domain).model_copy(
            update={"include": dict(include or {}), "prime": True, "max_tokens": max_tokens, "max_chars": max_chars}
        )
        try:
            RetrievalRequested.model_validate(request.model_dump())  # bounds on the budgets, as on the wire
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        event = await self._inject_event(project, request, session_id or f"api-{uuid.uuid4().hex[:12]}")
        if session_id is not None:  # a session the caller names can report its outcome: learning must know the items
            await asyncio.to_thread(self._note_injection, event)
        injected = event.payload
        document: dict[str, Any] = json.loads(injected.prime or "{}")
        document["context"] = injected.context
        return document

    # -- the services' code, called in process -------------------------------------------------------------

    @staticmethod
    def _request(
        prompt: str,
        max_items: int,
        domain: str | None,
        agent_role: str,
        task_type: str | None,
        strict_domain: bool = False,
    ) -> RetrievalRequested:
        if strict_domain and not (domain and domain.strip()):
            raise QueryError("strict_domain needs a domain")
        try:
            return RetrievalRequested(
                agent_name=PRODUCER,
                agent_role=agent_role,
                domain=domain,
                task_type=TaskType(task_type) if task_type else None,
                prompt=prompt,
                max_items=max_items,
                trigger=Trigger.USER_PROMPT,
                strict_domain=strict_domain,
            )
        except ValueError as exc:
            raise QueryError(str(exc)) from exc

    async def _run(self, event: Envelope[Any], *, searching: bool = False) -> Envelope[Any]:
        from ctxbus.adapters.kafka.handling import PoisonEvent  # noqa: PLC0415

        retriever = self._searcher if searching else self._retriever
        handler = retriever if isinstance(event.payload, RetrievalRequested) else self._injector
        try:
            (output,) = await handler(event)
        except PoisonEvent as exc:  # an unknown profile, a bad override: the caller's error
            raise QueryError(str(exc)) from exc
        return output.event

    async def _search(
        self, project: str, request: RetrievalRequested, session_id: str = "api", *, abstain: bool = False
    ) -> RetrievalCompleted:
        """A retrieval for search results (every near copy listed, none collapsed); ``abstain`` applies the floor."""
        from ctxbus.adapters.kafka.handling import PoisonEvent  # noqa: PLC0415

        event = Envelope.root(request, project=project, session_id=session_id, producer=PRODUCER)
        try:
            completed: RetrievalCompleted = (await self._searcher.complete(event, abstain=abstain)).payload
        except PoisonEvent as exc:  # an unknown profile, a bad override: the caller's error
            raise QueryError(str(exc)) from exc
        return completed

    async def _inject_event(
        self, project: str, request: RetrievalRequested, session_id: str
    ) -> Envelope[ContextInjected]:
        event = Envelope.root(request, project=project, session_id=session_id, producer=PRODUCER)
        completed = await self._run(event)
        injected: Envelope[ContextInjected] = await self._run(completed)
        return injected

    # -- lifecycle ------------------------------------------------------------------------------------------

    def _sync(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this Memory's own loop (not from inside a running loop: use the a* methods)."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(work)

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
