"""Retriever: request -> embed the prompt -> search the request's project -> rank -> completed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.runner import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import RankedItem, RetrievalCompleted, RetrievalRequested
from ctxbus.contract.topics import Topics
from ctxbus.core.ranked_items import to_payload_item
from ctxbus.core.ranking import RankingWeights, rank
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchHit, SearchQuery, VectorStore

log = structlog.get_logger("ctxbus.retriever")

SERVICE = "retriever"
#: Candidates fetched per requested item, so ranking has something to reorder.
OVERFETCH = 3


def query_text(request: RetrievalRequested) -> str:
    """What is embedded for a request: the prompt, with the domain and mentioned files as hints."""
    parts = [request.prompt.strip()]
    if request.domain:
        parts.append(f"domain: {request.domain}")
    if request.mentioned_files:
        parts.append("files: " + ", ".join(request.mentioned_files[:10]))
    return "\n".join(p for p in parts if p)


class RetrieverHandler:
    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        topics: Topics,
        metrics: Metrics,
        *,
        weights: RankingWeights | None = None,
        min_score: float = 0.0,
        min_similarity: float = -1.0,
        clock: Callable[[], datetime],
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._topics = topics
        self._metrics = metrics
        self._weights = weights or RankingWeights()
        self._min_score = min_score
        self._min_similarity = min_similarity
        self._clock = clock

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, RetrievalRequested):
            raise PoisonEvent(f"the retriever takes retrieval requests, not {event.event_type}")
        request: RetrievalRequested = event.payload
        started = time.perf_counter()
        text = query_text(request)
        items: tuple[RankedItem, ...] = ()
        candidates = 0
        empty_reason: str | None = None
        if not request.prompt.strip():
            empty_reason = "empty_prompt"
        else:
            try:
                hits = await asyncio.to_thread(self._search, event.project, text, request)
            except (OSError, TimeoutError) as exc:
                raise RetriableError(f"vector store unavailable: {exc}") from exc
            candidates = len(hits)
            ranked = rank(
                hits,
                domain=request.domain,
                now=self._clock(),
                weights=self._weights,
                min_score=self._min_score,
                min_similarity=self._min_similarity,
                max_items=request.max_items,
            )
            items = tuple(to_payload_item(h) for h in ranked)
            if not items:
                empty_reason = "no_memories_in_project" if not candidates else "nothing_relevant_enough"
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        completed = RetrievalCompleted(
            request=request,
            request_emitted_at=event.emitted_at,
            items=items,
            candidates_considered=candidates,
            retrieval_duration_ms=round(elapsed_ms, 3),
            embedding_model=self._embedder.model_id,
            empty_reason=empty_reason,
        )
        log.info("retrieved", project=event.project, items=len(items), candidates=candidates, ms=round(elapsed_ms, 2))
        return [Output(self._topics.retrieval_completed, event.caused(completed, producer=SERVICE))]

    def _search(self, project: str, text: str, request: RetrievalRequested) -> list[SearchHit]:
        t0 = time.perf_counter()
        vector = self._embedder.embed_query(text)
        t1 = time.perf_counter()
        hits = self._store.search(
            SearchQuery(
                vector=vector,
                project=project,
                limit=request.max_items * OVERFETCH,
                min_confidence=request.min_confidence or None,
            )
        )
        t2 = time.perf_counter()
        self._metrics.stage.labels(SERVICE, "embed").observe(t1 - t0)
        self._metrics.stage.labels(SERVICE, "search").observe(t2 - t1)
        return list(hits)
