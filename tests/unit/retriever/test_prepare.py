"""Embedding ahead: the retriever embeds the next requests' queries together, at most a batch, leaves a lone query
to its own path; its deadline wrapper prepares only the requests it will serve and says how many it covered."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ctxbus.adapters.embedding.query_cache import CachedQueryEmbedder
from ctxbus.adapters.kafka.handling import Output
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import LoadShedder, WorkEstimate
from ctxbus.observability import Metrics
from ctxbus.ports import Vector
from ctxbus.retriever.expiry import RetrieverDeadlines
from ctxbus.retriever.handler import RetrieverHandler


class Embedder:
    model_id, dim, max_tokens = "fake", 2, 256

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        self.calls.append(list(texts))
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> Vector:
        return self.embed([text])[0]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def request(prompt: str, deadline: datetime | None = None) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="t", prompt=prompt, trigger=Trigger.USER_PROMPT, deadline=deadline)
    return Envelope.root(payload, project="p", session_id="s", producer="t")


def handler(embedder: Embedder, query_batch: int) -> RetrieverHandler:
    return RetrieverHandler(
        CachedQueryEmbedder(embedder),
        None,  # type: ignore[arg-type]  # prepare never searches
        Topics("t"),
        Metrics(),
        clock=lambda: datetime.now(UTC),
        query_batch=query_batch,
        skip_meta_prompts=True,
    )


async def test_the_next_queries_are_embedded_together_at_most_a_batch() -> None:
    embedder = Embedder()
    retriever = handler(embedder, query_batch=3)
    batch = [(request(p), 9 - i) for i, p in enumerate(["fix login", "   ", "add paging", "why flaky", "tidy", "x"])]
    assert await retriever.prepare(batch) == 4  # three queries (the blank prompt has none), then a batch is full
    assert embedder.calls == [["fix login", "add paging", "why flaky"]]
    assert await retriever.prepare(batch[4:5]) == 1  # a lone query: left to its own path
    assert len(embedder.calls) == 1


class Inner:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> int:
        self.asked.append([e.payload.prompt for e, _ in batch])  # type: ignore[union-attr]
        return 2

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        return []


async def test_only_requests_that_will_be_served_are_prepared() -> None:
    shedder = LoadShedder(WorkEstimate(window=3), probe_after_s=600)
    for _ in range(3):
        shedder.served(1.0, now=time.monotonic())  # a retrieval takes a second
    inner = Inner()
    deadlines = RetrieverDeadlines(
        inner, topic="t", embedding_model="fake", metrics=Metrics(), clock=lambda: datetime.now(UTC), shedder=shedder
    )
    soon = datetime.now(UTC) + timedelta(seconds=0.5)  # less than a retrieval: answered at once
    later = datetime.now(UTC) + timedelta(seconds=30)
    batch = [(request("a", soon), 4), (request("b", later), 3), (request("c", None), 2), (request("d", later), 1)]
    assert await deadlines.prepare(batch) == 3  # the inner covered two served ones: b and c, the third entry
    assert inner.asked == [["b", "c", "d"]]
