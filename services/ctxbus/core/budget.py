"""Seed 004's budget for one injection: tier shares, the preserved head and tail, compression.

``BudgetPlan`` is what assembly needs from a profile (made from the retriever's own
``RetrievalPlan`` by ``budget_plan``):

* **Tier shares.** What the preserved items leave of the budget for items is split among the memory
  tiers (task, project, global) by the plan's weights (``allocate``): a tier never gets more than
  its items need, and what it does not need is split again, by weight, among the tiers that still
  want more, until the budget is spent or every tier has all it wants. A tier with no items
  therefore gets nothing and wastes nothing. Assembly fills each tier up to its share in rank order; what is left of any
  share afterwards goes to the items that did not fit their tier's share, in rank order.
* **Preserved items.** The first ``preserve`` items given (the retriever puts the profile's
  preserved head and tail first: ``ctxbus.core.assembly_order.preserve_order``) are placed before all
  others and regardless of tier shares; only the whole budget limits them.
* **Compression.** When the profile allows it, an item that does not fit whole (its tier's share
  or the whole budget) is shortened by ``compress_item`` (extractive, ``ctxbus.core.extract``,
  keeping about ``1 - aggressiveness`` of each text) and placed if the shorter one fits, so more
  distinct items fit instead of being dropped. A shortened text ends with ``COMPRESSION_MARKER``.
  A profile that disallows compression (or has an aggressiveness of 0) never shortens an item.

An item costs its tokens, or its characters at the budget's token-per-character ratio when that
is more (so the character budget is shared fairly too); headers and the suggested approach are
taken off the top before the split, and the whole text is always checked against both budgets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ctxbus.core.extract import shorten
from ctxbus.core.policy import RetrievalPlan, item_tier, tier_budgets
from ctxbus.core.profiles import ContextProfile, InvalidOverride, Tier, apply_overrides, resolve_profile
from ctxbus.core.ranking import RankedHit
from ctxbus.memory.model import MemoryItem

#: Appended to every text compression shortened.
COMPRESSION_MARKER = " …(shortened)"
#: The text fields compression may shorten (titles never).
COMPRESSIBLE_FIELDS = ("content", "key_insight", "lesson_learned", "mitigation")


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """How one assembly spends its budget (see the module docstring).

    ``weights`` of None: one pool, no tier shares. ``preserve``: how many of the first items
    given are preserved. ``aggressiveness`` 0..1: how much compression takes away.
    """

    weights: Mapping[Tier, float] | None = None
    preserve: int = 0
    compression: bool = False
    aggressiveness: float = 0.0
    task_id: str | None = None
    profile: str | None = None

    def __post_init__(self) -> None:
        if self.preserve < 0:
            raise ValueError(f"preserve must not be negative, got {self.preserve}")
        if not 0.0 <= self.aggressiveness <= 1.0:
            raise ValueError(f"aggressiveness must be in 0..1, got {self.aggressiveness}")

    @property
    def compresses(self) -> bool:
        return self.compression and self.aggressiveness > 0.0


#: The whole budget as one pool: no tiers, nothing preserved, no compression.
WHOLE_BUDGET = BudgetPlan()


@dataclass(frozen=True, slots=True)
class TierUse:
    """One tier in an assembly: its weight, its share of the item budget, what its items used."""

    tier: Tier
    weight: float
    allocated: int
    used: int = 0
    items: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "tier": self.tier.value,
            "weight": round(self.weight, 4),
            "allocated": self.allocated,
            "used": self.used,
            "items": self.items,
        }


def budget_plan(plan: RetrievalPlan) -> BudgetPlan:
    """The budget part of the retriever's plan: its tier weights, preserved counts and compression."""
    return BudgetPlan(
        weights=dict(plan.weights),
        preserve=plan.preserve_head + plan.preserve_tail,
        compression=plan.compression_allowed,
        aggressiveness=plan.compression_ratio,
        task_id=plan.task_id,
        profile=plan.profile,
    )


def profile_from(name: str, overrides: Mapping[str, str]) -> ContextProfile:
    """The profile called ``name`` with a request's JSON-encoded ``profile_overrides`` applied, as the
    retriever resolves it (``resolve_profile`` then ``apply_overrides``).

    Raises UnknownProfile or InvalidOverride.
    """
    profile = resolve_profile(name)
    decoded: dict[str, object] = {}
    for key, raw in overrides.items():
        try:
            decoded[key] = json.loads(raw)
        except ValueError as exc:
            raise InvalidOverride(f"profile override {key!r} is not JSON: {raw!r}") from exc
    return apply_overrides(profile, decoded)


def tier_of(hit: RankedHit, task_id: str | None = None) -> Tier:
    """The hit's tier as the retriever's plan scored it (``tier_<name>`` in its breakdown), else from the item."""
    for tier in Tier:
        if hit.breakdown.get(f"tier_{tier.value}") == 1.0:
            return tier
    return item_tier(hit.item, task_id)


def allocate(weights: Mapping[Tier, float], budget: int, demand: Mapping[Tier, int]) -> dict[Tier, int]:
    """``budget`` split among tiers by weight, no tier above its ``demand``, the surplus re-split by weight
    among the tiers still wanting, until the budget is spent or every demand is met.

    Shares are whole numbers (``tier_budgets``, largest remainder); they sum to ``min(budget, total
    demand of tiers with a positive weight)``. A tier of zero weight gets nothing here.
    Raises ValueError for a negative budget.
    """
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    shares = dict.fromkeys(Tier, 0)
    wanting = {t for t in Tier if demand.get(t, 0) > 0 and weights.get(t, 0.0) > 0.0}
    remaining = budget
    while wanting and remaining > 0:
        split = tier_budgets({t: weights[t] if t in wanting else 0.0 for t in Tier}, remaining)
        met = {t for t in wanting if shares[t] + split[t] >= demand[t]}
        if not met:
            for tier in wanting:
                shares[tier] += split[tier]
            break
        for tier in met:
            remaining -= demand[tier] - shares[tier]
            shares[tier] = demand[tier]
        wanting -= met
    return shares


def compress_item(item: MemoryItem, aggressiveness: float) -> MemoryItem | None:
    """The item with its texts shortened to about ``1 - aggressiveness`` of their length, each shortened
    one marked with ``COMPRESSION_MARKER``; None when nothing could be shortened."""
    keep = 1.0 - aggressiveness
    changes: dict[str, str] = {}
    for name in COMPRESSIBLE_FIELDS:
        value = getattr(item, name)
        shorter = shorten(value, keep) if value else None
        if shorter is not None:
            changes[name] = shorter + COMPRESSION_MARKER
    return item.model_copy(update=changes) if changes else None


#: An item that did not fit: the whole budget was full.
OVER_BUDGET = "over_budget"
#: An item that did not fit: its tier's share was spent and no other tier left room.
TIER_BUDGET = "tier_budget"


@dataclass(frozen=True, slots=True)
class Placement:
    """Which candidates went in (by index, as placed: possibly shortened) and why the others did not."""

    chosen: tuple[tuple[int, MemoryItem], ...]
    skipped: tuple[tuple[int, str], ...]
    compressed: tuple[str, ...] = ()
    preserved: tuple[str, ...] = ()
    tiers: tuple[TierUse, ...] = ()
    item_budget: int | None = None


class _Placer:
    """The three passes of ``place``, with their running state."""

    def __init__(
        self,
        hits: Sequence[RankedHit],
        plan: BudgetPlan,
        cost: Callable[[MemoryItem], int],
        fits: Callable[[Sequence[MemoryItem]], bool],
    ) -> None:
        self.hits, self.plan, self.cost, self.fits = hits, plan, cost, fits
        self.tiers = [tier_of(h, plan.task_id) for h in hits]
        self.chosen: dict[int, MemoryItem] = {}
        self.used = dict.fromkeys(Tier, 0)
        self.compressed: list[int] = []
        self._shorter: dict[int, MemoryItem | None] = {}

    def shorter(self, index: int) -> MemoryItem | None:
        if index not in self._shorter:
            item = self.hits[index].item
            self._shorter[index] = compress_item(item, self.plan.aggressiveness) if self.plan.compresses else None
        return self._shorter[index]

    def try_place(self, index: int, room: int | None) -> str | None:
        """Place the item whole, else shortened; None when placed, else why not (``room``: the tier's)."""
        reason = TIER_BUDGET
        for candidate in (self.hits[index].item, self.shorter(index)):
            if candidate is None:
                continue
            cost = self.cost(candidate)
            if room is not None and cost > room:
                continue
            trial = {**self.chosen, index: candidate}
            if not self.fits([trial[i] for i in sorted(trial)]):
                reason = OVER_BUDGET
                continue
            self.chosen[index] = candidate
            self.used[self.tiers[index]] += cost
            if candidate is not self.hits[index].item:
                self.compressed.append(index)
            return None
        return reason if room is not None else OVER_BUDGET


def place(
    hits: Sequence[RankedHit],
    plan: BudgetPlan,
    *,
    item_budget: int,
    cost: Callable[[MemoryItem], int],
    fits: Callable[[Sequence[MemoryItem]], bool],
) -> Placement:
    """Choose among ``hits`` (distinct, in the order to try them) within the budget; see the module docstring.

    ``cost`` is an item's share of the budget, ``item_budget`` the budget for items (split among the
    tiers when the plan has weights), ``fits`` whether a set of items (in rank order) fits the whole
    budget. Pass 1 places the preserved items (the first ``plan.preserve``); pass 2 the others, each
    within its tier's share; pass 3 retries, in rank order, those their tier's share kept out.
    """
    placer = _Placer(hits, plan, cost, fits)
    preserved = range(min(plan.preserve, len(hits)))
    skipped: dict[int, str] = {}
    for index in preserved:
        reason = placer.try_place(index, None)
        if reason:
            skipped[index] = reason
    shares: dict[Tier, int] | None = None
    if plan.weights is not None:
        demand = dict.fromkeys(Tier, 0)
        for index in range(len(preserved), len(hits)):
            demand[placer.tiers[index]] += cost(hits[index].item)
        free = max(0, item_budget - sum(placer.used.values()))
        granted = allocate(plan.weights, free, demand)
        shares = {t: placer.used[t] + granted[t] for t in Tier}
    deferred: list[int] = []
    for index in range(len(preserved), len(hits)):
        tier = placer.tiers[index]
        room = shares[tier] - placer.used[tier] if shares is not None else None
        reason = placer.try_place(index, room)
        if reason == TIER_BUDGET:
            deferred.append(index)
        elif reason:
            skipped[index] = reason
    for index in deferred:  # what is left of every share, best ranked first
        if placer.try_place(index, None):
            skipped[index] = TIER_BUDGET
    tiers: tuple[TierUse, ...] = ()
    if shares is not None and plan.weights is not None:
        tiers = tuple(
            TierUse(
                tier=t,
                weight=plan.weights.get(t, 0.0),
                allocated=shares[t],
                used=placer.used[t],
                items=sum(1 for i in placer.chosen if placer.tiers[i] is t),
            )
            for t in Tier
        )
    return Placement(
        chosen=tuple(sorted(placer.chosen.items())),
        skipped=tuple(sorted(skipped.items())),
        compressed=tuple(hits[i].item.id for i in sorted(placer.compressed)),
        preserved=tuple(hits[i].item.id for i in preserved),
        tiers=tiers,
        item_budget=item_budget if shares is not None else None,
    )
