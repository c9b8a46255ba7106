"""Learning from outcomes: what an item's injections and their sessions' outcomes make of it.

An outcome (a session or a task succeeded, partly succeeded, failed) counts for every item that
was injected into that session (or task) before the outcome was reported. An item's counts are
therefore a function of the *set* of injections and outcomes, not of the order they arrive in:
replaying the topics from the start, in any interleaving, gives the same counts and the same
learned values.

Learned values move gradually and stay bounded: Bayesian shrinkage towards the item's own
(imported) values with a prior worth ``PRIOR_WEIGHT`` outcomes.

- success rate = (successes + PARTIAL_CREDIT * partials + prior_rate * PRIOR_WEIGHT) / (rated + PRIOR_WEIGHT),
  prior_rate = the item's own success rate, else 0.5;
- conviction = clamp(base + MAX_SHIFT * (successes + PARTIAL_CREDIT * partials - failures) / (rated + PRIOR_WEIGHT),
  MIN_CONVICTION, MAX_CONVICTION): one outcome moves it at most MAX_SHIFT / (1 + PRIOR_WEIGHT);
- usage count = the item's own + the injections that reported an outcome.

Unknown outcomes count as uses only.

A pinned item (a person said it matters: ``ctxbus memory pin``) is never lowered by learning: its conviction and
success rate are at least its own (imported) values, whatever its failures say; successes still raise them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ctxbus.memory.model import Feedback, MemoryItem

PRIOR_WEIGHT = 4.0
PARTIAL_CREDIT = 0.5
MAX_SHIFT = 0.3
MIN_CONVICTION = 0.05
MAX_CONVICTION = 0.99
NEUTRAL_RATE = 0.5

SESSION = "session"
TASK = "task"


@dataclass(frozen=True, slots=True)
class InjectionFact:
    event_id: str
    project: str
    session_id: str
    task_id: str | None
    emitted_at: datetime
    #: (project, id) of each injected item: the request's project, or the global scope
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class OutcomeFact:
    event_id: str
    project: str
    session_id: str
    task_id: str | None
    scope: str
    outcome: str
    emitted_at: datetime


def _applies(outcome: OutcomeFact, injection: InjectionFact) -> bool:
    if injection.project != outcome.project or injection.emitted_at > outcome.emitted_at:
        return False
    if outcome.scope == TASK and outcome.task_id:
        return injection.task_id == outcome.task_id
    return injection.session_id == outcome.session_id


def feedback_counts(
    injections: Iterable[InjectionFact], outcomes: Iterable[OutcomeFact]
) -> dict[tuple[str, str], Feedback]:
    """Counts by (project, item id). Each (outcome, item) pair counts once, however often the item was
    injected into that session; duplicate events (same event id) count once."""
    by_id_inj = {i.event_id: i for i in injections}
    by_id_out = {o.event_id: o for o in outcomes}
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for outcome in sorted(by_id_out.values(), key=lambda o: o.event_id):
        items = {key for inj in by_id_inj.values() if _applies(outcome, inj) for key in inj.items}
        for key in items:
            c = counts[key]
            c[0] += 1
            if outcome.outcome == "successful":
                c[1] += 1
            elif outcome.outcome == "partial":
                c[2] += 1
            elif outcome.outcome == "failed":
                c[3] += 1
    return {k: Feedback(uses=c[0], successes=c[1], partials=c[2], failures=c[3]) for k, c in counts.items()}


def _rated(fb: Feedback) -> int:
    return fb.successes + fb.partials + fb.failures


def learned_success_rate(item: MemoryItem) -> float | None:
    """The success rate with outcomes folded in (None when neither the item nor outcomes give one); a pinned
    item's never falls below its own."""
    fb = item.feedback
    if not _rated(fb):
        return item.success_rate
    prior = item.success_rate if item.success_rate is not None else NEUTRAL_RATE
    good = fb.successes + PARTIAL_CREDIT * fb.partials
    learned = (good + prior * PRIOR_WEIGHT) / (_rated(fb) + PRIOR_WEIGHT)
    return max(learned, prior) if item.pinned else learned


def learned_conviction(item: MemoryItem) -> float:
    """The item's confidence moved by its outcomes, bounded; a pinned item's never falls below its own."""
    fb = item.feedback
    if not _rated(fb):
        return item.confidence
    net = fb.successes + PARTIAL_CREDIT * fb.partials - fb.failures
    shifted = min(MAX_CONVICTION, max(MIN_CONVICTION, item.confidence + MAX_SHIFT * net / (_rated(fb) + PRIOR_WEIGHT)))
    return max(shifted, item.confidence) if item.pinned else shifted


def learned_usage(item: MemoryItem) -> int:
    return item.usage_count + item.feedback.uses


def with_learning(item: MemoryItem) -> MemoryItem:
    """The item as ranking and injection see it: learned conviction, success rate and usage."""
    fb = item.feedback
    if not (fb.uses or fb.successes or fb.partials or fb.failures):  # nothing learned (no model built to compare)
        return item
    return item.model_copy(
        update={
            "confidence": learned_conviction(item),
            "success_rate": learned_success_rate(item),
            "usage_count": learned_usage(item),
        }
    )


def changed(
    before: Mapping[tuple[str, str], Feedback], after: Mapping[tuple[str, str], Feedback]
) -> set[tuple[str, str]]:
    """Keys whose counts differ between two count maps (absent = zero)."""
    zero = Feedback()
    return {k for k in set(before) | set(after) if before.get(k, zero) != after.get(k, zero)}
