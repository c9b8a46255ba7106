"""How the profile comparison judges a difference: better or worse only when the queries can show it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxbus.bench.retrieval_tasks import compare


@dataclass(frozen=True)
class _Query:
    id: str
    project: str = "p"
    query: str = "q"
    domain: str | None = None
    relevant: dict[str, int] = field(default_factory=lambda: {"good": 3})
    task_type: str | None = "feature"


@dataclass(frozen=True)
class _Found:
    id: str


@dataclass(frozen=True)
class _Result:
    items: list[_Found]
    task_type: str | None = "feature"


class _Ranker:
    """Puts the relevant item first for the queries named in ``first``, tenth for the others."""

    def __init__(self, first: set[str]) -> None:
        self.first = first

    def search(self, project: str, text: str, **_: object) -> _Result:
        ids = [f"other-{i}" for i in range(9)]
        ids.insert(0 if text in self.first else 9, "good")
        return _Result([_Found(i) for i in ids])


def _queries(n: int) -> list[_Query]:
    return [_Query(f"q{i}", query=f"q{i}") for i in range(n)]


def test_a_profile_that_helps_nearly_every_query_is_shown_better() -> None:
    queries = _queries(20)
    with_profile = _Ranker({q.query for q in queries[:18]})
    without = _Ranker(set())
    feature = compare(with_profile, without, queries)["labelled"]["feature"]
    assert (feature["better"], feature["worse"], feature["equal"]) == (18, 0, 2)
    low, high = feature["ndcg_delta_ci95"]
    assert 0 < low <= feature["ndcg_delta"] <= high
    assert feature["sign_test_p"] < 0.001 and feature["verdict"] == "better"


def test_a_profile_that_helps_some_queries_and_hurts_as_many_is_level() -> None:
    queries = _queries(20)
    with_profile = _Ranker({q.query for q in queries[:5]})
    without = _Ranker({q.query for q in queries[5:10]})
    feature = compare(with_profile, without, queries)["labelled"]["feature"]
    assert (feature["better"], feature["worse"]) == (5, 5)
    low, high = feature["ndcg_delta_ci95"]
    assert low < 0 < high and feature["ndcg_delta"] == 0.0
    assert feature["sign_test_p"] == 1.0 and feature["verdict"] == "level"


def test_a_profile_that_hurts_is_shown_worse() -> None:
    queries = _queries(12)
    feature = compare(_Ranker(set()), _Ranker({q.query for q in queries}), queries)["labelled"]["feature"]
    assert feature["ndcg_delta_ci95"][1] < 0 and feature["verdict"] == "worse"
