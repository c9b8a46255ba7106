"""The relevance floor judged at every store size, and fitted on some stores to be judged on others (pure).

A *sample* is one prompt in one store, answered once by the real retriever with the floor off: the store's
evidence (:class:`ctxbus.core.abstain.Evidence`, with the store's size) and the ranked top ``k``. Any floor
policy is then simulated exactly (the floor only decides whether a request gets its items):

- **false rejection**: an on-topic prompt that gets none of its relevant items (turned away by the floor, or
  none of them in the top ``k``);
- **false injection**: a null prompt that gets any item.

Both are reported per store size, for the prompts a floor may be fitted on (``fit``) and for the held-out
ones (other teams' stores, held-out prompts), with exact 95% intervals.

The fit (:func:`fit`) searches :data:`GRID` (keyword weight, margin weight, the size from which the margin
counts, the slope in ln n) and the floor itself, on the ``fit`` samples only, for the policy whose worst cell
is best on average: a cell is a store size and a kind of store (labelled subsets, teams' conventions), so the
small team stores a new user starts with weigh as much as the labelled ones; in each cell the larger of the false
rejection and false injection rates counts, and the mean over the cells is made smallest (the largest over the
cells, the target's own measure, was tried first: with a few dozen prompts in a team cell it chased one cell's
noise); ties go to the smaller worst cell, then to the simpler policy (grid order).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ctxbus.bench.intervals import clopper_pearson
from ctxbus.core.abstain import Evidence, FloorPolicy, relevance

#: (keyword weight, margin weight, margin from, size slope) tried by the fit
GRID: tuple[tuple[float, float, int, float], ...] = tuple(
    itertools.product(
        (0.0, 0.1, 0.2, 0.3),
        (-0.5, -0.25, 0.0),
        (0, 50, 200),
        (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12),
    )
)
#: floors tried for each grid point (at the reference size)
FLOORS = tuple(round(0.1 + 0.005 * i, 3) for i in range(101))


@dataclass(frozen=True, slots=True)
class Sample:
    """One prompt in one store, answered with the floor off."""

    prompt_id: str
    store: str
    kind: str
    #: the store size it is reported under, and its set (fit or held_out)
    size: int
    set: str
    evidence: Evidence
    ranked: tuple[str, ...]
    #: graded ids the store holds (empty: a null prompt)
    relevant: frozenset[str]
    category: str = ""

    @property
    def on_topic(self) -> bool:
        return bool(self.relevant)

    @property
    def found(self) -> bool:
        """An on-topic prompt's top ``k`` holds one of its relevant items (the floor aside)."""
        return not self.relevant.isdisjoint(self.ranked)


@dataclass(frozen=True, slots=True)
class Rates:
    on_topic: int
    false_rejections: int
    nulls: int
    false_injections: int

    @property
    def frr(self) -> float | None:
        return self.false_rejections / self.on_topic if self.on_topic else None

    @property
    def fir(self) -> float | None:
        return self.false_injections / self.nulls if self.nulls else None

    def as_dict(self) -> dict[str, Any]:
        frr_low, frr_high = clopper_pearson(self.false_rejections, self.on_topic) if self.on_topic else (0.0, 1.0)
        fir_low, fir_high = clopper_pearson(self.false_injections, self.nulls) if self.nulls else (0.0, 1.0)
        return {
            "on_topic": self.on_topic,
            "false_rejections": self.false_rejections,
            "false_rejection_rate": None if self.frr is None else round(self.frr, 4),
            "false_rejection_interval": [round(frr_low, 4), round(frr_high, 4)],
            "nulls": self.nulls,
            "false_injections": self.false_injections,
            "false_injection_rate": None if self.fir is None else round(self.fir, 4),
            "false_injection_interval": [round(fir_low, 4), round(fir_high, 4)],
        }


def passes(sample: Sample, policy: FloorPolicy | None) -> bool:
    """Whether the request gets its items under ``policy`` (None: no floor)."""
    if policy is None or not policy.enabled:
        return True
    judged = relevance(sample.evidence, policy)
    return judged is not None and judged.passes


def rates(samples: Iterable[Sample], policy: FloorPolicy | None) -> Rates:
    on = rejected = nulls = injected = 0
    for s in samples:
        let_through = passes(s, policy)
        if s.on_topic:
            on += 1
            rejected += not (let_through and s.found)
        else:
            nulls += 1
            injected += let_through and bool(s.ranked)
    return Rates(on, rejected, nulls, injected)


def by_size(samples: Sequence[Sample], policy: FloorPolicy | None, **where: str) -> dict[int, Rates]:
    """Rates per store size, over the samples whose attributes match ``where`` (e.g. ``set="held_out"``)."""
    chosen = [s for s in samples if all(getattr(s, k) == v for k, v in where.items())]
    return {size: rates([s for s in chosen if s.size == size], policy) for size in sorted({s.size for s in chosen})}


def _parts(samples: Sequence[Sample], margin_from: int, pack: int) -> tuple[np.ndarray, ...]:
    """Per sample: best cosine, margin (as the floor counts it), keyword part, ln store size."""
    probe = FloorPolicy(
        min_relevance=0.0, pack_size=pack, margin_weight=1.0, keyword_weight=1.0, margin_from=margin_from
    )
    best, margin, keyword, log_size = [], [], [], []
    for s in samples:
        judged = relevance(s.evidence, probe)
        best.append(judged.best if judged else -2.0)
        margin.append(judged.margin if judged else 0.0)
        keyword.append(judged.keyword if judged else 0.0)
        log_size.append(math.log(max(s.evidence.store_size or 1, 1)))
    return tuple(np.asarray(x, dtype=float) for x in (best, margin, keyword, log_size))


def fit(samples: Sequence[Sample], base: FloorPolicy) -> tuple[FloorPolicy, dict[str, float]]:
    """The grid's policy whose worst store size is best on ``samples`` (see the module doc)."""
    cells = sorted({(s.size, s.kind) for s in samples})
    on = np.asarray([s.on_topic for s in samples])
    found = np.asarray([s.found for s in samples])
    has_items = np.asarray([bool(s.ranked) for s in samples])
    groups = [np.asarray([(s.size, s.kind) == cell for s in samples]) for cell in cells]
    floors = np.asarray(FLOORS)
    best_key: tuple[float, float, int] | None = None
    chosen = base
    parts = {m: _parts(samples, m, base.pack_size) for m in {g[2] for g in GRID}}
    for index, (kw, mw, margin_from, slope) in enumerate(GRID):
        cos, margin, keyword, log_size = parts[margin_from]
        score = cos + mw * margin + kw * keyword - slope * (log_size - math.log(base.reference_size))
        let = score[None, :] >= floors[:, None]  # floors x samples
        worst = np.zeros(len(floors))
        total = np.zeros(len(floors))
        for group in groups:
            g_on, g_null = group & on, group & ~on
            frr = (~(let[:, g_on] & found[g_on])).mean(axis=1) if g_on.any() else np.zeros(len(floors))
            fir = (let[:, g_null] & has_items[g_null]).mean(axis=1) if g_null.any() else np.zeros(len(floors))
            worst = np.maximum(worst, np.maximum(frr, fir))
            total += np.maximum(frr, fir)
        for f_index in range(len(floors)):
            key = (round(float(total[f_index]) / len(groups), 6), round(float(worst[f_index]), 6), index)
            if best_key is None or key < best_key:
                best_key = key
                chosen = replace(
                    base,
                    min_relevance=float(floors[f_index]),
                    keyword_weight=kw,
                    margin_weight=mw,
                    margin_from=margin_from,
                    size_slope=slope,
                )
    assert best_key is not None
    return chosen, {"mean": best_key[0], "worst": best_key[1]}


def describe(policy: FloorPolicy) -> dict[str, Any]:
    return {
        "min_relevance": policy.min_relevance,
        "reference_size": policy.reference_size,
        "size_slope": policy.size_slope,
        "pack_size": policy.pack_size,
        "margin_weight": policy.margin_weight,
        "margin_from": policy.margin_from,
        "keyword_weight": policy.keyword_weight,
    }
