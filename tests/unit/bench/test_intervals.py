"""Intervals and tests the retrieval benchmark prints: checked against values computed independently."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.bench.intervals import binomial_cdf, bootstrap_mean, clopper_pearson, sign_test, verdict


def test_the_binomial_cdf_sums_the_distribution() -> None:
    assert binomial_cdf(2, 4, 0.5) == pytest.approx(11 / 16)
    assert binomial_cdf(-1, 4, 0.5) == 0.0
    assert binomial_cdf(4, 4, 0.3) == 1.0
    assert binomial_cdf(0, 10, 0.1) == pytest.approx(0.9**10)


def _tail(k: int, n: int, p: float, *, at_least: bool) -> float:
    """P(X >= k) or P(X <= k) for X ~ Binomial(n, p), summed directly (independent of the module)."""
    terms = range(k, n + 1) if at_least else range(k + 1)
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in terms)


@pytest.mark.parametrize(("k", "n"), [(3, 98), (1, 20), (5, 10), (17, 145), (60, 82)])
def test_clopper_pearson_solves_its_defining_equations(k: int, n: int) -> None:
    lo, hi = clopper_pearson(k, n)
    assert _tail(k, n, lo, at_least=True) == pytest.approx(0.025, abs=1e-9)
    assert _tail(k, n, hi, at_least=False) == pytest.approx(0.025, abs=1e-9)


def test_clopper_pearson_at_the_ends_has_its_closed_form() -> None:
    assert clopper_pearson(0, 50) == (0.0, pytest.approx(1 - 0.025 ** (1 / 50)))
    assert clopper_pearson(50, 50) == (pytest.approx(0.025 ** (1 / 50)), 1.0)
    lo, hi = clopper_pearson(5, 10)
    assert lo + hi == pytest.approx(1.0)  # symmetric around one half


@pytest.mark.parametrize(("k", "n"), [(-1, 5), (6, 5), (0, 0)])
def test_clopper_pearson_refuses_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="0 <= k <= n"):
        clopper_pearson(k, n)


@given(st.integers(min_value=1, max_value=300), st.data())
def test_the_interval_holds_the_observed_rate(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    lo, hi = clopper_pearson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_the_bootstrap_interval_holds_the_mean_and_is_repeatable() -> None:
    values = [0.1, -0.05, 0.0, 0.2, 0.0, 0.03, -0.1, 0.15, 0.0, 0.05] * 3
    lo, hi = bootstrap_mean(values)
    mean = sum(values) / len(values)
    assert lo < mean < hi
    assert (lo, hi) == bootstrap_mean(values)  # seeded
    # about mean +- 1.96 standard errors for a sample this size
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    assert lo == pytest.approx(mean - 1.96 * se, abs=0.6 * se)
    assert hi == pytest.approx(mean + 1.96 * se, abs=0.6 * se)


def test_identical_differences_give_a_point() -> None:
    assert bootstrap_mean([0.0] * 12) == (0.0, 0.0)
    with pytest.raises(ValueError, match="no values"):
        bootstrap_mean([])


def test_the_sign_test_is_exact_and_two_sided() -> None:
    assert sign_test(0, 5) == pytest.approx(2 / 32)
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(3, 3) == 1.0
    assert sign_test(0, 0) == 1.0
    exact = Fraction(2 * sum(math.comb(45, i) for i in range(17)), 2**45)
    assert sign_test(16, 29) == pytest.approx(float(exact))


def test_a_difference_is_shown_only_when_its_interval_leaves_out_zero() -> None:
    assert verdict((0.001, 0.02)) == "better"
    assert verdict((-0.03, -0.002)) == "worse"
    assert verdict((-0.01, 0.02)) == "level"
    assert verdict((0.0, 0.02)) == "level"
