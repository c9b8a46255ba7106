"""How sure a benchmark figure is: exact binomial intervals, paired bootstrap intervals and the sign test.

Pure functions of the figures (no I/O, no randomness that is not seeded), for ``ctxbus bench retrieval``:

* a rate of ``k`` in ``n`` (false injections over null prompts) gets its Clopper-Pearson interval, which
  never undercovers, also at 0 of ``n``;
* a mean of paired differences (nDCG@10 with a task profile minus without it on the same queries, recall@10
  with the floor minus without) gets a percentile bootstrap interval of the mean, resampling the queries;
* better / worse counts get the exact two-sided sign test (ties left out).

A difference is *shown* only when its interval leaves out 0; otherwise the data cannot tell it from none.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

#: Confidence level of every interval the reports print.
LEVEL = 0.95
#: Bootstrap resamples (the interval's ends move by about 0.001 between seeds at this count).
RESAMPLES = 2000
#: Seed of the bootstrap, so a report prints the same interval for the same figures.
SEED = 20261126
BISECTIONS = 60


def _log_pmf(n: int, k: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    log_comb = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return log_comb + k * math.log(p) + (n - k) * math.log1p(-p)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, math.fsum(math.exp(_log_pmf(n, i, p)) for i in range(k + 1)))


def _solve(target: float, increasing: bool, f: Callable[[float], float]) -> float:
    """The p in 0..1 where the monotonic ``f`` crosses ``target`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate of ``k`` in ``n``."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    alpha = 1.0 - level
    # lower: P(X >= k | p) = alpha/2, which grows with p; upper: P(X <= k | p) = alpha/2, which falls with p
    lower = 0.0 if k == 0 else _solve(alpha / 2, True, lambda p: 1.0 - binomial_cdf(k - 1, n, p))
    upper = 1.0 if k == n else _solve(alpha / 2, False, lambda p: binomial_cdf(k, n, p))
    return lower, upper


def bootstrap_mean(
    values: Sequence[float], level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (paired differences: one value per query)."""
    if not values:
        raise ValueError("no values")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1.0 - level) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1.0 - tail) * resamples) - 1)]
    return low, high


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact sign test p-value of ``better`` against ``worse`` paired outcomes (ties left out)."""
    n = better + worse
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_cdf(min(better, worse), n, 0.5))


def verdict(interval: tuple[float, float]) -> str:
    """``better`` / ``worse`` when the interval of a difference leaves out 0, else ``level``."""
    low, high = interval
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "level"
