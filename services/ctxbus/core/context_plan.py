"""What goes into a context and in which order: the retriever's steps after the ranking.

1. the agent profile re-scores the ranked candidates and drops what it excludes (:func:`ctxbus.core.policy.apply_plan`);
2. near copies collapse into the best of their cluster and the item cap cuts (:mod:`ctxbus.core.collapse`): this
   decides **what is in the context**, by relevance, priors and the agent's preferences;
3. the task type's factor orders those items (:func:`ctxbus.core.task_profiles.apply_task_profile`): among the
   items the ranking chose, the kinds the task wants come first. It never changes which items are in the context,
   so an item the task type wants cannot push a more relevant one out (measured with ``ctxbus bench retrieval``:
   applied before the cut, the factor lifted loosely related wanted kinds over relevant principles, conventions
   and patterns and cost recall@10). The task type's prefetch still decides which candidates compete in step 2;
4. seed 004's head and tail come first in assembly order (:func:`ctxbus.core.assembly_order.preserve_order`), and the
   task type's example count applies (:func:`ctxbus.core.task_profiles.limit_examples`); a profile that puts its wanted
   kinds first (a session's start: the project's rules) places them before everything else, in that order;
5. past attempts (a captured session's episode, an imported attempt) take at most one of the first three places
   (:func:`spread_attempts`): a session's summary is broad, so it resembles any prompt of its project, and two of
   them at the head push out the specific fix or rule the prompt is about; they follow right after instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ctxbus.core.assembly_order import preserve_order
from ctxbus.core.collapse import collapse_near_copies
from ctxbus.core.policy import RetrievalPlan, apply_plan
from ctxbus.core.ranking import RankedHit
from ctxbus.core.task_profiles import TaskTypeProfile, apply_task_profile, limit_examples
from ctxbus.memory.model import MemoryKind

#: the first places of a context, and how many of them past attempts may take
HEAD_PLACES = 3
ATTEMPTS_AT_HEAD = 1


def spread_attempts(
    hits: Sequence[RankedHit], head: int = HEAD_PLACES, most: int = ATTEMPTS_AT_HEAD
) -> list[RankedHit]:
    """The hits in the same order, except that past attempts beyond the first ``most`` of the first ``head`` places
    move to just after those places (none is dropped)."""
    out: list[RankedHit] = []
    held: list[RankedHit] = []
    placed = 0  # attempts among the first places
    for hit in hits:
        is_attempt = hit.item.kind is MemoryKind.ATTEMPT
        if len(out) < head and is_attempt and placed >= most:
            held.append(hit)
            continue
        placed += is_attempt and len(out) < head
        out.append(hit)
        if len(out) == head:
            out.extend(held)
            held = []
    return out + held


def plan_context(
    ranked: Sequence[RankedHit],
    plan: RetrievalPlan,
    task_profile: TaskTypeProfile,
    *,
    now: datetime,
    half_life_days: float,
    prefetched: frozenset[tuple[str, str]] = frozenset(),
    collapse: bool = True,
) -> list[RankedHit]:
    """The context's items in assembly order (module doc); ``collapse=False`` lists near copies (search results)."""
    # near copies collapse before the cut, so the places they free go to the next distinct items
    rescored = apply_plan(ranked, replace(plan, max_items=plan.candidate_limit))
    chosen = collapse_near_copies(rescored, plan.max_items, collapse=collapse)
    ordered = apply_task_profile(chosen, task_profile, now=now, half_life_days=half_life_days, prefetched=prefetched)
    assembly = preserve_order(ordered, plan.preserve_head, plan.preserve_tail)
    if task_profile.wanted_first:  # the wanted kinds are placed (and kept under the budget) before the rest
        assembly.sort(key=lambda hit: not task_profile.wants(hit.item))
    return limit_examples(spread_attempts(assembly), task_profile)
