"""The retrieval policy of seed 004 §4: a profile and a task become a retrieval plan, and re-score hits.

Holds: tier weights adjusted by task mode and normalised (``adjust_weights``);
``RetrievalPlan`` and ``plan_retrieval``; ``apply_plan``, which filters and re-scores
ranked hits; the tier of an item (``item_tier``); the split of a token budget by tier
(``tier_budgets``). The files a request and an item mention are ``ctxbus.core.mentions``'s;
head/tail preservation for assembly is ``ctxbus.core.assembly_order``'s (``preserve_order``).

Task modes: seed 004 raises task memory for implementation and project memory
for analysis. ctxbus's task types map onto those modes by ``MODE_BY_TASK_TYPE``
(feature, bugfix, refactor implement; review, explore analyse; general and no
type leave the profile's weights as they are).

Tiers: an item in ``GLOBAL_PROJECT`` is global; otherwise an item tagged
``task:<id>`` is task memory only for the request that names that task id; everything else (a
request without a task id included: no item is its task's memory) is project memory.

Re-scoring (``apply_plan``), with every part added to the breakdown::

    total = base * tier_factor + file_boost + kind_boost
    tier_factor = tier_weight * len(Tier)   (1.0 when the three weights are equal)
    file_boost = FILE_BOOST when the item mentions a requested file, else 0
    kind_boost = PREFERRED_KIND_BOOST * base * tier_factor when the item's kind is preferred, else 0
                 (relative: a preferred kind wins among equally relevant items, it does not lift an
                 unrelated item over a relevant one)

Seed 004 filters to preferred kinds; ctxbus prefers them instead (a boost), so
a profile whose preferred kinds ctxbus does not store still gets context.
Excluded kinds and items under the minimum importance are dropped.

The agent profile and the task type's profile (``ctxbus.core.task_profiles``, seed 001)
combine in this order, each step's parts in the item's breakdown:

1. the agent profile bounds what may be fetched (excluded kinds, minimum importance), and a
   strict domain keeps to that domain (store-side filters);
2. the task type adds a prefetch of the kinds it wants, within what the agent profile allows
   (``prefetch_kinds``; an agent's excluded kind is never fetched, whatever the task wants);
3. the ranking scores relevance and priors (``ctxbus.core.ranking``);
4. the agent profile re-scores the result (``rescore`` below: its ``base`` is step 3's score), near
   copies collapse and the cap applies: this chooses the context's items;
5. the task type's factor multiplies the chosen items' scores (``ranking_total * task_factor``) and
   orders them; assembly order preserves head and tail; the task type's example count applies
   (steps 4 and 5: ``ctxbus.core.context_plan``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ctxbus.contract.payloads import TaskType
from ctxbus.core.mentions import item_mentions, mentioned_files_for
from ctxbus.core.profiles import ContextProfile, Tier
from ctxbus.core.ranking import RankedHit
from ctxbus.core.task_profiles import GENERAL_PROFILE, TaskTypeProfile
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind


class TaskMode(StrEnum):
    """Seed 004's task modes that change tier weights."""

    IMPLEMENT = "implement"
    ANALYSIS = "analysis"


#: Which task types are implementation and which analysis (others: weights unchanged).
MODE_BY_TASK_TYPE: dict[TaskType, TaskMode] = {
    TaskType.FEATURE: TaskMode.IMPLEMENT,
    TaskType.BUGFIX: TaskMode.IMPLEMENT,
    TaskType.REFACTOR: TaskMode.IMPLEMENT,
    TaskType.REVIEW: TaskMode.ANALYSIS,
    TaskType.EXPLORE: TaskMode.ANALYSIS,
}
#: Seed 004's weight factors per mode: implementation wants task memory, analysis project memory.
MODE_FACTORS: dict[TaskMode, dict[Tier, float]] = {
    TaskMode.IMPLEMENT: {Tier.TASK: 1.2, Tier.PROJECT: 0.9},
    TaskMode.ANALYSIS: {Tier.TASK: 0.9, Tier.PROJECT: 1.2},
}
#: Added to the score of an item that mentions a file the request mentions.
FILE_BOOST = 0.15
#: An item of a kind the profile prefers gains this share of its own score.
PREFERRED_KIND_BOOST = 0.1
#: The retriever fetches this many times the item cap, so filtering and re-scoring have room.
CANDIDATE_MULTIPLIER = 3
#: Item cap when neither the request nor the profile gives one (the request's default).
DEFAULT_MAX_ITEMS = 10
#: The tag prefix that marks an item as task memory (``task:<task id>``).
TASK_TAG_PREFIX = "task:"
#: Reasons given by ``rejection_reason``.
EXCLUDED_KIND = "excluded_kind"
BELOW_MIN_IMPORTANCE = "below_min_importance"


def adjust_weights(profile: ContextProfile, task_type: TaskType | None) -> dict[Tier, float]:
    """The profile's tier weights scaled for the task's mode and normalised: non-negative, summing to 1."""
    weights = profile.tier_weights()
    mode = MODE_BY_TASK_TYPE.get(task_type) if task_type is not None else None
    if mode is not None:
        for tier, factor in MODE_FACTORS[mode].items():
            weights[tier] *= factor
    total = sum(weights.values())
    return {tier: max(0.0, w / total) for tier, w in weights.items()}


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    """What the retriever should ask the store for, and how to re-score what comes back.

    ``include_kinds`` is every kind not excluded (for a positive store filter);
    ``candidate_limit`` is how many hits to fetch before ``apply_plan`` cuts to ``max_items``.
    """

    profile: str
    task_type: TaskType | None
    weights: Mapping[Tier, float]
    include_kinds: frozenset[MemoryKind]
    exclude_kinds: frozenset[MemoryKind]
    preferred_kinds: frozenset[MemoryKind]
    min_importance: float
    max_items: int
    candidate_limit: int
    mentioned_files: tuple[str, ...] = ()
    task_id: str | None = None
    preserve_head: int = 0
    preserve_tail: int = 0
    compression_allowed: bool = True
    compression_ratio: float = 0.0
    overrides: tuple[str, ...] = ()
    #: the task type's profile (``general``: none) and the kinds it prefetches (empty: no prefetch)
    task_profile: TaskTypeProfile = GENERAL_PROFILE
    prefetch_kinds: frozenset[MemoryKind] = frozenset()


def plan_retrieval(
    profile: ContextProfile,
    task_type: TaskType | None,
    request_text: str,
    mentioned_files: Sequence[str] = (),
    *,
    max_items: int = DEFAULT_MAX_ITEMS,
    task_id: str | None = None,
    task_profile: TaskTypeProfile = GENERAL_PROFILE,
) -> RetrievalPlan:
    """The plan for one request: the profile's preferences, weights for the task mode, the files mentioned,
    and the task type's prefetch (its wanted kinds the profile does not exclude).

    ``mentioned_files`` (from the request) come first, then files found in ``request_text``;
    the item cap is the smaller of ``max_items`` and the profile's own, if it has one.
    Raises ValueError when ``max_items`` is below 1.
    """
    if max_items < 1:
        raise ValueError(f"max_items must be at least 1, got {max_items}")
    files = mentioned_files_for(mentioned_files, request_text)
    cap = min(max_items, profile.max_items) if profile.max_items is not None else max_items
    return RetrievalPlan(
        profile=profile.name,
        task_type=task_type,
        weights=adjust_weights(profile, task_type),
        include_kinds=frozenset(MemoryKind) - profile.excluded_kinds,
        exclude_kinds=profile.excluded_kinds,
        preferred_kinds=profile.preferred_kinds,
        min_importance=profile.min_importance,
        max_items=cap,
        candidate_limit=cap * CANDIDATE_MULTIPLIER,
        mentioned_files=files,
        task_id=task_id.strip() if task_id and task_id.strip() else None,
        preserve_head=profile.preserve_head,
        preserve_tail=profile.preserve_tail,
        compression_allowed=profile.allow_compression,
        compression_ratio=profile.compression_aggressiveness,
        overrides=profile.overrides,
        task_profile=task_profile,
        prefetch_kinds=task_profile.wanted_kinds - profile.excluded_kinds,
    )


def item_tier(item: MemoryItem, task_id: str | None = None) -> Tier:
    """Global for ``GLOBAL_PROJECT``; task when tagged ``task:<task_id>``; else project.

    A request without a task id (None or blank) has no task memory: an item tagged with some task is
    project memory to it, weighted like the project's other items (issue 25: any ``task:*`` item used to
    take the task tier's weight then, and outranked the items the prompt was about).
    """
    if item.project == GLOBAL_PROJECT:
        return Tier.GLOBAL
    wanted = task_id.strip().lower() if task_id else ""
    if not wanted:
        return Tier.PROJECT
    task_tags = [t[len(TASK_TAG_PREFIX) :] for t in item.tags if t.startswith(TASK_TAG_PREFIX)]
    return Tier.TASK if wanted in task_tags else Tier.PROJECT


def rejection_reason(plan: RetrievalPlan, item: MemoryItem) -> str | None:
    """Why the plan drops the item (EXCLUDED_KIND, BELOW_MIN_IMPORTANCE), or None when it keeps it."""
    if item.kind in plan.exclude_kinds:
        return EXCLUDED_KIND
    if item.importance < plan.min_importance:
        return BELOW_MIN_IMPORTANCE
    return None


def rescore(hit: RankedHit, plan: RetrievalPlan) -> RankedHit:
    """The hit re-scored by the plan (module docstring), its breakdown extended to explain the new total."""
    tier = item_tier(hit.item, plan.task_id)
    tier_weight = plan.weights[tier]
    tier_factor = tier_weight * len(Tier)
    file_match = 1.0 if item_mentions(hit.item, plan.mentioned_files) else 0.0
    preferred = 1.0 if hit.item.kind in plan.preferred_kinds else 0.0
    parts = {
        "base": hit.score,
        f"tier_{tier.value}": 1.0,
        "tier_weight": tier_weight,
        "tier_factor": tier_factor,
        "file_match": file_match,
        "file_boost": FILE_BOOST * file_match,
        "kind_preferred": preferred,
        "kind_boost": PREFERRED_KIND_BOOST * preferred * hit.score * tier_factor,
    }
    total = hit.score * tier_factor + parts["file_boost"] + parts["kind_boost"]
    return RankedHit(item=hit.item, score=total, breakdown={**hit.breakdown, **parts, "total": total})


def apply_plan(ranked: Sequence[RankedHit], plan: RetrievalPlan) -> list[RankedHit]:
    """The hits the plan keeps, re-scored, best first (ties by item id, then project), at most ``max_items``."""
    kept = [rescore(h, plan) for h in ranked if rejection_reason(plan, h.item) is None]
    kept.sort(key=lambda r: (-r.score, r.item.id, r.item.project))
    return kept[: plan.max_items]


def tier_budgets(weights: Mapping[Tier, float], budget: int) -> dict[Tier, int]:
    """``budget`` (tokens) split by tier weight, whole numbers summing exactly to it (largest remainder).

    Raises ValueError for a negative budget or weights that do not sum to a positive number.
    """
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    total = sum(max(0.0, weights.get(t, 0.0)) for t in Tier)
    if total <= 0:
        raise ValueError("tier weights must sum to a positive number")
    exact = {t: budget * max(0.0, weights.get(t, 0.0)) / total for t in Tier}
    shares = {t: int(v) for t, v in exact.items()}
    by_remainder = sorted(Tier, key=lambda t: (-(exact[t] - shares[t]), list(Tier).index(t)))
    for tier in by_remainder[: budget - sum(shares.values())]:
        shares[tier] += 1
    return shares
