"""The store-size judgement of the floor (pure): false rejection and false injection per size, and a fit
that finds the floor separating on-topic from null prompts when the data allow it."""

from __future__ import annotations

import pytest

from ctxbus.bench.store_data import size_bucket
from ctxbus.bench.store_floor import Sample, by_size, fit, rates
from ctxbus.core.abstain import Evidence, FloorPolicy


def _sample(pid: str, size: int, best: float, *, on: bool, found: bool = True, kind: str = "team") -> Sample:
    ranked = ("r",) if found else ("x",)
    return Sample(
        pid,
        "s",
        kind,
        size_bucket(size),
        "fit",
        Evidence((best, 0.05), 0.0, store_size=size),
        ranked,
        frozenset({"r"}) if on else frozenset(),
    )


def test_rates_count_rejections_and_injections() -> None:
    samples = [
        _sample("a", 10, 0.5, on=True),
        _sample("b", 10, 0.2, on=True),  # turned away
        _sample("c", 10, 0.6, on=True, found=False),  # let through, but not its item
        _sample("d", 10, 0.45, on=False),  # injected
        _sample("e", 10, 0.1, on=False),
    ]
    policy = FloorPolicy(min_relevance=0.4, margin_weight=0.0, keyword_weight=0.0, size_slope=0.0)
    r = rates(samples, policy)
    assert (r.on_topic, r.false_rejections, r.nulls, r.false_injections) == (3, 2, 2, 1)
    none = rates(samples, None)
    assert (none.false_rejections, none.false_injections) == (1, 2)
    assert r.as_dict()["false_rejection_interval"][0] < 2 / 3 < r.as_dict()["false_rejection_interval"][1]


def test_the_fit_finds_a_size_aware_floor_when_the_nulls_best_grows_with_size() -> None:
    """Null prompts' best match grows with the store; on-topic ones stay: only a floor that rises with the
    size separates both sizes, and the fit finds one."""
    samples = []
    for i in range(20):
        samples += [_sample(f"s-on-{i}", 10, 0.40 + i * 0.002, on=True), _sample(f"s-null-{i}", 10, 0.30, on=False)]
        samples += [_sample(f"l-on-{i}", 2000, 0.62 + i * 0.002, on=True), _sample(f"l-null-{i}", 2000, 0.55, on=False)]
    flat = FloorPolicy(min_relevance=0.5, margin_weight=0.0, keyword_weight=0.0, size_slope=0.0)
    assert max(r.frr or 0 for r in by_size(samples, flat).values()) == 1.0  # small stores lose everything
    fitted, objective = fit(samples, base=FloorPolicy())
    assert objective["worst"] == 0.0 and fitted.size_slope > 0
    for r in by_size(samples, fitted).values():
        assert r.false_rejections == 0 and r.false_injections == 0


@pytest.mark.parametrize(
    ("n", "bucket"), [(5, 5), (7, 5), (8, 10), (15, 10), (30, 30), (150, 100), (300, 400), (400, 400), (1900, 2000)]
)
def test_sizes_are_reported_under_the_nearest_bucket(n: int, bucket: int) -> None:
    assert size_bucket(n) == bucket
