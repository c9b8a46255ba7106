"""The relevance floor: raw evidence in, a verdict with its numbers out."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.contract.payloads import Trigger
from ctxbus.core import abstain
from ctxbus.core.abstain import NO_FLOOR, Evidence, FloorPolicy, applies, relevance
from ctxbus.core.fusion import lexical_part
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import SearchHit
from ctxbus.settings import InjectionSettings


def hit(item_id: str, cosine: float, *, bm25: float = 0.0, dense_rank: int = 0, sparse_rank: int = 0) -> SearchHit:
    item = MemoryItem(id=item_id, project="p", kind=MemoryKind.PATTERN, content=f"note {item_id}")
    extra = {"bm25": bm25, "dense_rank": float(dense_rank), "sparse_rank": float(sparse_rank)}
    return SearchHit(item, cosine, extra)


def test_evidence_takes_the_dense_candidates_best_first_and_the_best_keyword_match_of_all() -> None:
    hits = [
        hit("kw", 0.05, bm25=22.0, sparse_rank=1),  # found by keywords only: not part of the pack
        hit("b", 0.41, dense_rank=2, bm25=3.0, sparse_rank=2),
        hit("a", 0.52, dense_rank=1),
        hit("c", 0.30, dense_rank=3),
    ]
    evidence = Evidence.of(hits)
    assert evidence.cosines == (0.52, 0.41, 0.30)
    assert evidence.best_id == "a" and evidence.best_bm25 == 22.0 and evidence.keyword_id == "kw"


def test_evidence_of_a_keyword_only_search_uses_every_candidate() -> None:
    evidence = Evidence.of([hit("x", 0.2, bm25=5.0, sparse_rank=1), hit("y", 0.3, bm25=1.0, sparse_rank=2)])
    assert evidence.cosines == (0.3, 0.2) and evidence.best_id == "y" and evidence.keyword_id == "x"
    empty = Evidence.of([])
    assert empty.cosines == () and empty.best_bm25 == 0.0 and empty.keyword_id is None


def test_relevance_is_the_best_cosine_plus_the_weighted_margin_and_keyword_evidence() -> None:
    cosines = (0.6, 0.5, 0.45, 0.4, 0.3, 0.25, 0.2, 0.1, 0.05)
    policy = FloorPolicy(min_relevance=0.5, pack_size=8, margin_weight=-0.5, keyword_weight=0.2)
    judged = relevance(Evidence(cosines, best_bm25=6.0, best_id="a"), policy)
    assert judged is not None
    median = statistics.median(cosines[:8])
    assert judged.best == 0.6 and judged.margin == pytest.approx(0.6 - median)
    assert judged.keyword == pytest.approx(0.5)  # bm25 6 is half way on the fusion's lexical scale
    assert judged.score == pytest.approx(0.6 - 0.5 * (0.6 - median) + 0.2 * 0.5)
    assert judged.passes
    assert set(judged.breakdown()) == {
        "relevance",
        "relevance_best",
        "relevance_margin",
        "relevance_keyword",
        "min_relevance",
    }


def test_a_store_smaller_than_the_pack_judges_its_best_candidate_alone() -> None:
    policy = FloorPolicy(min_relevance=0.45, pack_size=8, margin_weight=-0.5, keyword_weight=0.2)
    judged = relevance(Evidence((0.62, 0.1, 0.08), best_bm25=0.0, best_id="only"), policy)
    assert judged is not None and judged.margin == 0.0 and judged.score == pytest.approx(0.62) and judged.passes


def test_the_floor_is_inclusive_and_explains_itself() -> None:
    policy = FloorPolicy(min_relevance=0.4, pack_size=2, margin_weight=0.0, keyword_weight=0.0)
    at = relevance(Evidence((0.4, 0.1), 0.0, best_id="m-1"), policy)
    below = relevance(Evidence((0.3999, 0.1), 12.0, best_id="m-2"), policy)
    assert at is not None and at.passes
    assert below is not None and not below.passes
    line = below.explain()
    assert line.startswith("nothing_relevant_enough: relevance 0.400 < floor 0.4 (")
    assert "best cosine 0.400" in line and "keyword 0.667" in line and "best candidate m-2" in line
    assert relevance(Evidence((), 0.0), policy) is None


def test_session_starts_are_not_judged_and_the_floor_can_be_turned_off() -> None:
    policy = FloorPolicy()
    assert applies(Trigger.USER_PROMPT, policy) and applies(Trigger.GAP, policy) and applies(Trigger.RETRY, policy)
    assert not applies(Trigger.SESSION_START, policy)
    assert not applies(Trigger.USER_PROMPT, FloorPolicy(min_relevance=NO_FLOOR))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pack_size": 1}, "pack_size"),
        ({"keyword_weight": -0.1}, "keyword_weight"),
        ({"margin_weight": math.nan}, "finite"),
        ({"min_relevance": math.inf}, "finite"),
    ],
)
def test_bad_policies_are_refused(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FloorPolicy(**changes)  # type: ignore[arg-type]


def test_the_settings_defaults_are_the_calibrated_ones() -> None:
    injection = InjectionSettings()
    assert injection.min_relevance == abstain.DEFAULT_MIN_RELEVANCE
    assert injection.relevance_pack == abstain.DEFAULT_PACK_SIZE
    assert injection.relevance_margin_weight == abstain.DEFAULT_MARGIN_WEIGHT
    assert injection.relevance_keyword_weight == abstain.DEFAULT_KEYWORD_WEIGHT
    assert injection.skip_meta_prompts


_COSINES = st.lists(st.floats(min_value=-0.2, max_value=0.95), min_size=1, max_size=30).map(
    lambda c: tuple(sorted(c, reverse=True))
)
_POLICIES = st.builds(
    FloorPolicy,
    min_relevance=st.floats(min_value=-1.0, max_value=1.5),
    pack_size=st.integers(min_value=2, max_value=12),
    margin_weight=st.floats(min_value=-0.9, max_value=1.0),
    keyword_weight=st.floats(min_value=0.0, max_value=1.0),
)


@given(_COSINES, st.floats(min_value=0.0, max_value=80.0), st.floats(min_value=0.0, max_value=40.0), _POLICIES)
def test_more_keyword_evidence_never_lowers_relevance(
    cosines: tuple[float, ...], bm25: float, more: float, policy: FloorPolicy
) -> None:
    low = relevance(Evidence(cosines, bm25), policy)
    high = relevance(Evidence(cosines, bm25 + more), policy)
    assert low is not None and high is not None
    assert high.score >= low.score - 1e-12
    assert 0.0 <= low.keyword == lexical_part(bm25) < 1.0


@given(_COSINES, st.floats(min_value=0.0, max_value=0.3), st.floats(min_value=0.0, max_value=50.0), _POLICIES)
def test_closer_candidates_never_lower_relevance(
    cosines: tuple[float, ...], lift: float, bm25: float, policy: FloorPolicy
) -> None:
    # every candidate closer by the same amount: the margin stays, the best rises
    before = relevance(Evidence(cosines, bm25), policy)
    after = relevance(Evidence(tuple(c + lift for c in cosines), bm25), policy)
    assert before is not None and after is not None
    assert after.score >= before.score - 1e-9
    assert after.passes or not before.passes


def test_the_floor_rises_with_the_log_of_the_store_size() -> None:
    policy = FloorPolicy(min_relevance=0.5, size_slope=0.1, reference_size=100)
    assert policy.floor(None) == 0.5 and policy.floor(100) == pytest.approx(0.5)
    assert policy.floor(10) == pytest.approx(0.5 - 0.1 * math.log(10))
    assert policy.floor(1000) == pytest.approx(0.5 + 0.1 * math.log(10))
    assert policy.floor(5) < policy.floor(30) < policy.floor(400) < policy.floor(2000)


def test_the_same_evidence_passes_in_a_small_store_and_not_in_a_large_one() -> None:
    policy = FloorPolicy(min_relevance=0.45, size_slope=0.08, margin_weight=0.0, keyword_weight=0.0)
    small = relevance(Evidence((0.4, 0.1), 0.0, store_size=10), policy)
    large = relevance(Evidence((0.4, 0.1), 0.0, store_size=2000), policy)
    assert small is not None and small.passes and "for 10 items" in small.explain()
    assert large is not None and not large.passes and "for 2000 items" in large.explain()
    assert small.breakdown()["store_size"] == 10.0


def test_the_margin_counts_only_from_its_store_size_on() -> None:
    cosines = (0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1)
    policy = FloorPolicy(min_relevance=0.3, pack_size=8, margin_weight=-0.5, keyword_weight=0.0, margin_from=50)
    small = relevance(Evidence(cosines, 0.0, store_size=9), policy)
    large = relevance(Evidence(cosines, 0.0, store_size=500), policy)
    assert small is not None and small.margin == 0.0 and small.passes
    assert large is not None and large.margin == pytest.approx(0.4) and not large.passes


def test_size_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        FloorPolicy(reference_size=0)
    with pytest.raises(ValueError):
        FloorPolicy(margin_from=-1)
    with pytest.raises(ValueError):
        FloorPolicy(size_slope=float("nan"))
