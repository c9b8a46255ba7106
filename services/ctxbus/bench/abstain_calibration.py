"""Calibrating the relevance floor (``ctxbus bench retrieval --calibrate``).

The procedure, kept apart from the figures it is judged by:

1. Every graded query and every null prompt about a topic (meta prompts are recognised by rule and
   take no part) runs once through the real retriever without the floor; what the store said about
   its candidates (:class:`ctxbus.core.abstain.Evidence`) and its ranked top ``k`` are kept.
2. For every policy of :data:`GRID`, ``min_relevance`` is set as high as it can go while the graded
   queries lose at most ``budget`` of recall@``k`` (a query the floor turns away loses all of its recall;
   the floor drops nothing else); the policy that then turns away the most null prompts wins (ties: the
   smaller recall loss, then the simpler policy). Fitted on every sample, this gives the defaults.
3. How well that carries to prompts it was not fitted on: 5-fold cross-validation (the whole search
   of step 2 on four folds, judged on the fifth; folds by a hash of the id), and the same with one fixed
   half (``crc32(id)`` even: calibration) fitted and the other judged. The floor fitted to lose at most
   ``budget`` in sample loses more on unseen prompts (the highest floor the budget allows sits right under
   the weakest graded queries), so the cross-validation is also run for the stricter budgets of
   :data:`BUDGETS`: the out-of-sample trade-off between recall lost and null prompts let through. Picking a
   budget from those figures is a fit too, so a nested cross-validation judges that choice: on each outer
   fold the budget is chosen by an inner cross-validation of the training folds only (:func:`choose_budget`).

The false injection rate is over the null prompts about topics; over every null prompt it is lower by the
share of meta prompts, which are recognised by rule (:mod:`ctxbus.core.meta_prompts`) and never get items.

The floor applied online is :func:`ctxbus.core.abstain.relevance` on the same evidence, so simulating a
policy here gives exactly what the retriever would do with it.
"""

from __future__ import annotations

import itertools
import statistics
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxbus.bench.ir_metrics import recall_at
from ctxbus.core.abstain import Evidence, FloorPolicy, relevance

CALIBRATION = "calibration"
HELD_OUT = "held_out"
#: Share of recall@k the graded queries may lose (the target: at most 2 points).
DEFAULT_BUDGET = 0.02
#: The policies tried: pack sizes, margin weights (negative: a close pack counts, positive: standing out
#: from it counts) and keyword weights.
GRID: tuple[FloorPolicy, ...] = tuple(
    FloorPolicy(min_relevance=0.0, pack_size=p, margin_weight=m, keyword_weight=w)
    for p, m, w in itertools.product(
        (5, 8, 12), (-0.75, -0.5, -0.25, 0.0, 0.25, 0.5), (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
    )
)
FOLDS = 5
#: The recall budgets whose cross-validated figures the report shows (and among which the nested
#: cross-validation chooses).
BUDGETS = (0.01, 0.015, 0.02)
#: Salt of the inner folds of the nested cross-validation (other folds than the outer ones).
INNER = "inner:"


def split_of(item_id: str) -> str:
    """The half an id belongs to, fixed by its hash."""
    return CALIBRATION if zlib.crc32(item_id.encode("utf-8")) % 2 == 0 else HELD_OUT


@dataclass(frozen=True, slots=True)
class Sample:
    """One prompt's evidence and its ranked top ``k`` without the floor."""

    id: str
    evidence: Evidence
    ranked: tuple[str, ...]
    #: graded ids (empty for a null prompt)
    relevant: dict[str, int]

    @property
    def graded(self) -> bool:
        return bool(self.relevant)

    @property
    def split(self) -> str:
        return split_of(self.id)

    def recall(self, k: int) -> float:
        return recall_at(self.ranked, self.relevant, k) if self.relevant else 0.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """A policy's effect on a set of samples."""

    graded: int
    nulls: int
    #: recall@k lost on the graded queries (mean over them), and how many were turned away
    recall_loss: float
    graded_abstained: int
    #: null prompts that still got items
    false_injection_rate: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "graded": self.graded,
            "nulls": self.nulls,
            "recall_loss": round(self.recall_loss, 4),
            "graded_abstained": self.graded_abstained,
            "false_injection_rate": round(self.false_injection_rate, 4),
        }


def _score(sample: Sample, policy: FloorPolicy) -> float:
    judged = relevance(sample.evidence, policy)
    return judged.score if judged is not None else float("-inf")


def outcome(samples: Sequence[Sample], policy: FloorPolicy, k: int) -> Outcome:
    graded = [s for s in samples if s.graded]
    nulls = [s for s in samples if not s.graded]
    turned_away = [s for s in graded if _score(s, policy) < policy.min_relevance]
    injected = sum(1 for s in nulls if _score(s, policy) >= policy.min_relevance)
    return Outcome(
        graded=len(graded),
        nulls=len(nulls),
        recall_loss=sum(s.recall(k) for s in turned_away) / len(graded) if graded else 0.0,
        graded_abstained=len(turned_away),
        false_injection_rate=injected / len(nulls) if nulls else 0.0,
    )


def highest_floor(samples: Sequence[Sample], policy: FloorPolicy, k: int, budget: float) -> float:
    """The highest ``min_relevance`` (3 decimals, rounded down) at which the graded samples lose at most
    ``budget`` of recall@k under ``policy``'s weights."""
    graded = sorted((_score(s, policy), s.recall(k)) for s in samples if s.graded)
    if not graded:
        return policy.min_relevance
    lost = 0.0
    for score, recall in graded:
        if (lost + recall) / len(graded) > budget:
            return int(score * 1000) / 1000  # rounded down: this sample still passes
        lost += recall
    return int(graded[-1][0] * 1000) / 1000 + 0.001  # every graded sample may be turned away


def _simplicity(policy: FloorPolicy) -> tuple[float, ...]:
    return (abs(policy.margin_weight), policy.keyword_weight, abs(policy.pack_size - 8))


def calibrate(
    samples: Sequence[Sample], k: int, budget: float = DEFAULT_BUDGET, grid: Iterable[FloorPolicy] = GRID
) -> tuple[FloorPolicy, Outcome]:
    """The best policy of ``grid`` on ``samples`` (see the module doc, step 3) and its outcome there."""
    best: tuple[tuple[float, ...], FloorPolicy, Outcome] | None = None
    for candidate in grid:
        policy = replace(candidate, min_relevance=highest_floor(samples, candidate, k, budget))
        result = outcome(samples, policy, k)
        key = (result.false_injection_rate, result.recall_loss, *_simplicity(policy))
        if best is None or key < best[0]:
            best = (key, policy, result)
    if best is None:
        raise ValueError("the grid is empty")
    return best[1], best[2]


def _fold(sample_id: str, folds: int, salt: str) -> int:
    return zlib.crc32((salt + sample_id).encode("utf-8")) // 2 % folds


def cross_validate(
    samples: Sequence[Sample], k: int, budget: float, folds: int = FOLDS, *, salt: str = ""
) -> dict[str, Any]:
    """``folds``-fold cross-validation of the whole procedure (folds by id hash, graded and nulls alike)."""
    rows = []
    for fold in range(folds):
        test = [s for s in samples if _fold(s.id, folds, salt) == fold]
        train = [s for s in samples if _fold(s.id, folds, salt) != fold]
        policy, _ = calibrate(train, k, budget)
        rows.append(outcome(test, policy, k))
    return {
        "folds": folds,
        "false_injection_rate": round(statistics.fmean(r.false_injection_rate for r in rows), 4),
        "recall_loss": round(statistics.fmean(r.recall_loss for r in rows), 4),
        "per_fold": [r.as_dict() for r in rows],
    }


def choose_budget(samples: Sequence[Sample], k: int, target: float, budgets: Iterable[float] = BUDGETS) -> float:
    """The largest of ``budgets`` whose cross-validated recall loss (inner folds) stays within ``target``; the
    smallest when none does."""
    candidates = sorted(set(budgets))
    fits = [b for b in candidates if cross_validate(samples, k, b, salt=INNER)["recall_loss"] <= target]
    return fits[-1] if fits else candidates[0]


def nested_cross_validate(
    samples: Sequence[Sample], k: int, target: float, budgets: Iterable[float] = BUDGETS, folds: int = FOLDS
) -> dict[str, Any]:
    """The budget chosen by cross-validation (:func:`choose_budget`) and the fit at it, both on the training
    folds only, judged on the held-out fold: what choosing the budget from cross-validated figures gives on
    prompts neither step saw."""
    rows = []
    for fold in range(folds):
        test = [s for s in samples if _fold(s.id, folds, "") == fold]
        train = [s for s in samples if _fold(s.id, folds, "") != fold]
        budget = choose_budget(train, k, target, budgets)
        policy, _ = calibrate(train, k, budget)
        rows.append({"budget": budget, **outcome(test, policy, k).as_dict()})
    return {
        "folds": folds,
        "false_injection_rate": round(statistics.fmean(r["false_injection_rate"] for r in rows), 4),
        "recall_loss": round(statistics.fmean(r["recall_loss"] for r in rows), 4),
        "per_fold": rows,
    }


def tradeoff(samples: Sequence[Sample], policy: FloorPolicy, k: int) -> list[dict[str, float]]:
    """The policy's weights at other floors: recall loss and false injections, for choosing a setting."""
    rows = []
    for loss_budget in (0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1):
        floor = highest_floor(samples, policy, k, loss_budget)
        result = outcome(samples, replace(policy, min_relevance=floor), k)
        rows.append(
            {
                "min_relevance": floor,
                "recall_loss": round(result.recall_loss, 4),
                "false_injection_rate": round(result.false_injection_rate, 4),
            }
        )
    return rows


def policy_dict(policy: FloorPolicy) -> dict[str, float]:
    return {
        "min_relevance": policy.min_relevance,
        "pack_size": policy.pack_size,
        "margin_weight": policy.margin_weight,
        "keyword_weight": policy.keyword_weight,
    }


def by_budget(
    samples: Sequence[Sample], k: int, budgets: Iterable[float], meta_prompts: int = 0
) -> list[dict[str, Any]]:
    """The cross-validated procedure at each budget; ``false_injection_rate_all_nulls`` counts the
    ``meta_prompts`` (turned away by rule) among the null prompts."""
    nulls = sum(not s.graded for s in samples)
    rows = []
    for budget in sorted(set(budgets)):
        cv = cross_validate(samples, k, budget)
        rate = cv["false_injection_rate"]
        rows.append(
            {
                "budget": budget,
                "false_injection_rate": rate,
                "recall_loss": cv["recall_loss"],
                "false_injection_rate_all_nulls": round(rate * nulls / (nulls + meta_prompts), 4) if nulls else 0.0,
            }
        )
    return rows


def report(
    samples: Sequence[Sample], k: int, budget: float, current: FloorPolicy, *, meta_prompts: int = 0
) -> dict[str, Any]:
    """The whole procedure (module doc): the fitted policy, how it carries over, and the current defaults
    (``meta_prompts``: null prompts recognised by rule, not among ``samples``)."""
    calibration = [s for s in samples if s.split == CALIBRATION]
    held_out = [s for s in samples if s.split == HELD_OUT]
    policy, fitted = calibrate(samples, k, budget)
    half_policy, half_fitted = calibrate(calibration, k, budget)
    return {
        "k": k,
        "budget": budget,
        "samples": {
            "graded": sum(s.graded for s in samples),
            "nulls": sum(not s.graded for s in samples),
            "meta_prompts": meta_prompts,
        },
        "fitted": policy_dict(policy),
        "fitted_in_sample": fitted.as_dict(),
        "cross_validation": cross_validate(samples, k, budget),
        "cross_validation_by_budget": by_budget(samples, k, (*BUDGETS, budget), meta_prompts),
        "nested_cross_validation": nested_cross_validate(samples, k, budget),
        "halves": {
            "fitted": policy_dict(half_policy),
            "on_calibration": half_fitted.as_dict(),
            "on_held_out": outcome(held_out, half_policy, k).as_dict(),
        },
        "current_defaults": policy_dict(current),
        "current_in_sample": outcome(samples, current, k).as_dict(),
        "tradeoff": tradeoff(samples, current, k),
    }


def _policy_line(p: dict[str, float]) -> str:
    return (
        f"min_relevance {p['min_relevance']}, pack {p['pack_size']}, margin weight {p['margin_weight']}, "
        f"keyword weight {p['keyword_weight']}"
    )


def _outcome_line(r: dict[str, Any]) -> str:
    return (
        f"false injections {r['false_injection_rate']:.3f} of {r['nulls']} null prompts; recall loss "
        f"{r['recall_loss']:.4f} ({r['graded_abstained']} of {r['graded']} graded queries turned away)"
    )


def print_report(result: dict[str, Any], out: Callable[[str], None] = print) -> None:
    out(
        f"relevance floor calibration: {result['samples']['graded']} graded queries, {result['samples']['nulls']} "
        f"null prompts about topics (meta prompts are recognised by rule); recall@{result['k']} budget "
        f"{result['budget']:.3f}"
    )
    out(f"  fitted on all: {_policy_line(result['fitted'])}")
    out(f"    in sample:   {_outcome_line(result['fitted_in_sample'])}")
    cv = result["cross_validation"]
    out(
        f"  {cv['folds']}-fold cross-validation (fitted on 4/5, judged on the rest): false injections "
        f"{cv['false_injection_rate']:.3f}, recall loss {cv['recall_loss']:.4f}"
    )
    out(
        f"  cross-validated at each recall budget: budget, recall loss, false injections (topic prompts; all "
        f"{result['samples']['nulls'] + result['samples']['meta_prompts']} null prompts)"
    )
    for row in result["cross_validation_by_budget"]:
        out(
            f"    {row['budget']:.3f}  {row['recall_loss']:.4f}  {row['false_injection_rate']:.3f}  "
            f"{row['false_injection_rate_all_nulls']:.3f}"
        )
    nested = result["nested_cross_validation"]
    out(
        f"  nested cross-validation (the budget chosen by cross-validation on the training folds, then fitted "
        f"there): false injections {nested['false_injection_rate']:.3f}, recall loss {nested['recall_loss']:.4f} "
        f"(budgets chosen: {', '.join(str(f['budget']) for f in nested['per_fold'])})"
    )
    halves = result["halves"]
    out(f"  one half fitted ({_policy_line(halves['fitted'])}):")
    out(f"    calibration: {_outcome_line(halves['on_calibration'])}")
    out(f"    held out:    {_outcome_line(halves['on_held_out'])}")
    out(f"  current defaults: {_policy_line(result['current_defaults'])}")
    out(f"    in sample:   {_outcome_line(result['current_in_sample'])}")
    out("  the defaults' weights at other floors: min_relevance, recall loss, false injections")
    for row in result["tradeoff"]:
        out(f"    {row['min_relevance']:>7.3f}  {row['recall_loss']:.4f}  {row['false_injection_rate']:.3f}")
