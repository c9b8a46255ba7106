"""Seed 004's head and tail preservation: the order in which assembly tries the chosen items.

The profile's ``preserve_head`` most important items and ``preserve_tail`` most recent ones come first, so only
the middle gives way when the budget is short (``ctxbus.core.context_plan`` applies it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbus.core.ranking import RankedHit


@dataclass(frozen=True, slots=True)
class PreservedSplit:
    """Hits split for seed 004's head/tail preservation: the rest (``middle``) keeps rank order."""

    head: tuple[RankedHit, ...]
    tail: tuple[RankedHit, ...]
    middle: tuple[RankedHit, ...]


def split_preserved(hits: Sequence[RankedHit], head: int, tail: int) -> PreservedSplit:
    """The ``head`` most important hits (importance, then score, then id) and, of the others,
    the ``tail`` most recent (``updated_at``, then id); the middle is what is left, in rank order.

    Raises ValueError for a negative count.
    """
    if head < 0 or tail < 0:
        raise ValueError(f"head and tail must not be negative, got {head}, {tail}")
    by_importance = sorted(hits, key=lambda h: (-h.item.importance, -h.score, h.item.id, h.item.project))
    heads = by_importance[:head]
    taken = {id(h) for h in heads}
    rest = [h for h in hits if id(h) not in taken]
    by_recency = sorted(rest, key=lambda h: (h.item.updated_at, h.item.id, h.item.project), reverse=True)
    tails = by_recency[:tail]
    taken.update(id(h) for h in tails)
    return PreservedSplit(tuple(heads), tuple(tails), tuple(h for h in hits if id(h) not in taken))


def preserve_order(hits: Sequence[RankedHit], head: int, tail: int) -> list[RankedHit]:
    """The hits in the order assembly should try them: preserved head, preserved tail, then the middle.

    Assembly places items greedily in the order given, so the preserved ones are the
    first to be placed and only the middle gives way when the budget is short.
    """
    split = split_preserved(hits, head, tail)
    return [*split.head, *split.tail, *split.middle]
