"""The retriever's idle rehearsal (``RetrieverHandler.rehearse``): a search and a ranking in the project searched
last, with nothing counted; nothing at all before the first request."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.ports import SearchHit, SearchQuery
from ctxbus.retriever.handler import RetrieverHandler, profile_for

from .test_prepare import Embedder


class Store:
    """Records the searches; finds nothing (what is searched is the point here, not what is found)."""

    def __init__(self) -> None:
        self.queries: list[SearchQuery] = []

    def search(self, query: SearchQuery) -> list[SearchHit]:
        self.queries.append(query)
        return []

    def count(self, project: str) -> int:
        return 0


def samples(metrics: Metrics) -> float:
    return sum(s.value for m in metrics.stage.collect() for s in m.samples if s.name.endswith("_count"))


def test_nothing_is_searched_before_the_first_request() -> None:
    store = Store()
    retriever = RetrieverHandler(Embedder(), store, Topics("t"), Metrics(), clock=lambda: datetime.now(UTC))  # type: ignore[arg-type]
    assert retriever.rehearse([1.0, 0.0], "warm") == 0
    assert store.queries == []


def test_the_rehearsal_searches_the_last_project_and_counts_nothing() -> None:
    store, metrics = Store(), Metrics()
    retriever = RetrieverHandler(Embedder(), store, Topics("t"), metrics, clock=lambda: datetime.now(UTC))  # type: ignore[arg-type]
    request = RetrievalRequested(agent_name="t", prompt="fix the login", trigger=Trigger.USER_PROMPT)
    retriever.retrieve("acme/web", "s", request, profile_for(request))
    counted, searched = samples(metrics), len(store.queries)
    assert counted > 0
    assert retriever.rehearse([0.0, 1.0], "keep warm") == 0
    assert len(store.queries) == searched + 1
    last = store.queries[-1]
    assert (last.project, last.vector, last.text) == ("acme/web", [0.0, 1.0], "keep warm")
    assert samples(metrics) == counted
