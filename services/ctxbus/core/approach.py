"""Seed 001's suggested approach: a few imperative steps for the task, built deterministically (no LLM)
from the items being injected.

The material, each piece taken from one injected item (its id travels with its step):

* **what worked**: the key insight (else lesson, else first sentence) of a *successful* past session's
  learning, best ranked first; learnings of unknown outcome are never recommended, failed and partial
  ones are pitfalls;
* **the pattern to reuse**: the best ranked pattern, with its example reference;
* **the principle that applies**: the best ranked principle (warning beliefs are pitfalls);
* **the pitfall to avoid**: the worst warning (severity, then rank), with its mitigation;
* **what to read first** (explore): the best ranked decision or convention.

A pattern or principle whose confidence (conviction) is below ``MIN_APPROACH_CONFIDENCE`` is never
used: the approach neither leads with nor recommends anything the store is not confident about.

The task type orders and words the steps (``ORDER``), and may add one step of its own that quotes
no item (``FRAMING``): a bugfix starts by reproducing the failure, then the past fix; a feature
reuses the pattern and ends with tests; a refactor secures a safety net, then the principle and the
pattern; a review lists principles and pitfalls to check; an exploration reads decisions and
conventions first; a general task (or none) gets the material in a neutral order. When the first
pass gives fewer than ``MIN_STEPS`` steps, a second item of a kind already used may be added (a
second success, pitfall, principle); never more than ``MAX_STEPS``.

No material, no approach: without at least one step from an item the text is empty (the task type's
own step is never shown alone). The header counts only learnings, as distinct past tasks (by
session): ``Based on 2 similar past tasks (1 successful), recommend:``; without a successful one the
count in brackets is left out, and without learnings the header is ``Recommended steps:``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxbus.contract.payloads import TaskType
from ctxbus.core.extract import cut_at_word, lead_sentence
from ctxbus.core.sections import LEARNINGS, PATTERNS, PRINCIPLES, WARNINGS, mitigation, section_of, severity
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome, Severity

#: Patterns and principles less confident than this are left out of the approach (seed 002's default
#: ``min_confidence_threshold``, the confidence a pattern needs to be recommended by the hook).
MIN_APPROACH_CONFIDENCE = 0.7
#: Fewest steps the approach tries to reach with the material it has (it never invents material).
MIN_STEPS = 3
#: Most steps.
MAX_STEPS = 5
#: Longest quote of an item in a step, in characters.
QUOTE_CHARS = 160
#: Longest pattern name in a step, in characters.
NAME_CHARS = 80

WORKED = "worked"
PATTERN = "pattern"
PRINCIPLE = "principle"
PITFALL = "pitfall"
READ_FIRST = "read_first"
OPEN = "open"
CLOSE = "close"

_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.HIGH: 1, Severity.MEDIUM: 2, Severity.LOW: 3}
_NEUTRAL: tuple[tuple[str, ...], tuple[str, ...]] = (
    (WORKED, PATTERN, PRINCIPLE, PITFALL),
    (WORKED, PITFALL, PRINCIPLE),
)

#: Per task type: the first pass (in step order) and the second pass (used while below MIN_STEPS).
ORDER: dict[TaskType | None, tuple[tuple[str, ...], tuple[str, ...]]] = {
    TaskType.BUGFIX: ((OPEN, WORKED, PITFALL, PATTERN, PRINCIPLE), (WORKED, PITFALL, PRINCIPLE)),
    TaskType.FEATURE: ((PATTERN, WORKED, PRINCIPLE, PITFALL, CLOSE), (WORKED, PITFALL, PRINCIPLE)),
    TaskType.REFACTOR: ((OPEN, PRINCIPLE, PATTERN, PITFALL, WORKED), (PRINCIPLE, PITFALL)),
    TaskType.REVIEW: ((PRINCIPLE, PITFALL, PATTERN, WORKED), (PRINCIPLE, PITFALL, READ_FIRST)),
    TaskType.EXPLORE: ((READ_FIRST, PATTERN, PRINCIPLE, WORKED, PITFALL), (READ_FIRST,)),
    TaskType.GENERAL: _NEUTRAL,
    None: _NEUTRAL,
}
#: The task type's own steps (quoting no item), at the start (OPEN) or the end (CLOSE).
FRAMING: dict[tuple[TaskType, str], str] = {
    (TaskType.BUGFIX, OPEN): "Reproduce the failure with a test before changing any code.",
    (TaskType.FEATURE, CLOSE): "Add tests for the new behaviour before calling it done.",
    (TaskType.REFACTOR, OPEN): "Make sure tests cover the code you will restructure, and keep them green.",
}


@dataclass(frozen=True, slots=True)
class Approach:
    """The steps, the item each quotes (None for the task type's own step), and the header's counts."""

    steps: tuple[str, ...]
    item_ids: tuple[str | None, ...]
    based_on: int
    successful: int
    task_type: TaskType | None = None

    @property
    def text(self) -> str:
        """The header, then one numbered step per line (empty without steps)."""
        if not self.steps:
            return ""
        if self.based_on:
            plural = "task" if self.based_on == 1 else "tasks"
            worked = f" ({self.successful} successful)" if self.successful else ""
            header = f"Based on {self.based_on} similar past {plural}{worked}, recommend:"
        else:
            header = "Recommended steps:"
        return "\n".join([header, *(f"{n}. {step}" for n, step in enumerate(self.steps, start=1))])


#: No suggested approach (not asked for, or no material).
NO_APPROACH = Approach((), (), 0, 0)


def confident(item: MemoryItem) -> bool:
    """Whether the item may be recommended: patterns and principles need MIN_APPROACH_CONFIDENCE."""
    if item.kind in (MemoryKind.PATTERN, MemoryKind.PRINCIPLE):
        return item.confidence >= MIN_APPROACH_CONFIDENCE
    return True


def _quote(text: str) -> str:
    """The text's first sentence, ending with a full stop (or the ellipsis of a cut)."""
    sentence = lead_sentence(text, QUOTE_CHARS)
    return sentence if sentence.endswith((".", "!", "?", "…")) else sentence + "."


def _bare(text: str) -> str:
    return _quote(text).rstrip(".")


def _worded(table: dict[TaskType, str], task_type: TaskType | None, default: str) -> str:
    return table.get(task_type, default) if task_type is not None else default


def _worked(item: MemoryItem, task_type: TaskType | None) -> str:
    insight = _quote(item.key_insight or item.lesson_learned or item.content)
    lead = _worded(
        {
            TaskType.BUGFIX: "Start from the fix that worked before",
            TaskType.REVIEW: "Compare with what worked before",
            TaskType.EXPLORE: "Note what worked before",
        },
        task_type,
        "Reuse what worked before",
    )
    return f"{lead}: {insight}"


def _pattern_name(item: MemoryItem) -> str:
    if not item.title.strip():
        return f'the pattern "{_bare(item.content)}"'
    name = cut_at_word(" ".join(item.title.split()), NAME_CHARS)
    return f"the {name}" if name.casefold().endswith("pattern") else f"the {name} pattern"


def _pattern(item: MemoryItem, task_type: TaskType | None) -> str:
    name = _pattern_name(item)
    where = f" ({item.example_reference})" if item.example_reference else ""
    verb = _worded(
        {
            TaskType.FEATURE: "Build on {name}{where}.",
            TaskType.REFACTOR: "Move the code towards {name}{where}.",
            TaskType.REVIEW: "Check that the change follows {name}{where}.",
            TaskType.EXPLORE: "See how {name} is applied{where}.",
        },
        task_type,
        "Follow {name}{where}.",
    )
    return verb.format(name=name, where=where)


def _principle(item: MemoryItem, task_type: TaskType | None) -> str:
    if task_type is TaskType.REVIEW:
        return f"Check that the change keeps to the principle: {_quote(item.content)}"
    if task_type is TaskType.EXPLORE:
        return f"Keep in mind the principle: {_quote(item.content)}"
    return f"Keep to the principle: {_quote(item.content)}"


def _pitfall(item: MemoryItem, task_type: TaskType | None) -> str:
    what = _bare(item.title or item.content)
    fix = mitigation(item)
    level = severity(item).value
    if task_type is TaskType.REVIEW:
        text = f"Check for the known pitfall ({level}): {what}."
        return text + (f" The fix: {_quote(fix)}" if fix else "")
    if task_type is TaskType.EXPLORE:
        text = f"Be aware of a known pitfall ({level}): {what}."
    else:
        text = f"Avoid the known pitfall ({level}): {what}."
    return text + (f" Instead: {_quote(fix)}" if fix else "")


def _read_first(item: MemoryItem, task_type: TaskType | None) -> str:
    what = _bare(item.title or item.content)
    if task_type is TaskType.REVIEW:
        return f"Check the {item.kind.value} too: {what}."
    return f"Read the {item.kind.value} first: {what}."


_WRITERS: dict[str, Callable[[MemoryItem, TaskType | None], str]] = {
    WORKED: _worked,
    PATTERN: _pattern,
    PRINCIPLE: _principle,
    PITFALL: _pitfall,
    READ_FIRST: _read_first,
}


def material(items: Sequence[MemoryItem]) -> dict[str, list[MemoryItem]]:
    """The items the approach may quote, by slot, best first (see the module docstring)."""
    usable = [i for i in items if confident(i)]
    return {
        WORKED: [i for i in usable if section_of(i) == LEARNINGS and i.outcome is Outcome.SUCCESSFUL],
        PATTERN: [i for i in usable if section_of(i) == PATTERNS],
        PRINCIPLE: [i for i in usable if section_of(i) == PRINCIPLES],
        PITFALL: sorted((i for i in usable if section_of(i) == WARNINGS), key=lambda w: _SEVERITY_ORDER[severity(w)]),
        READ_FIRST: [i for i in usable if i.kind in (MemoryKind.DECISION, MemoryKind.CONVENTION)],
    }


def past_tasks(items: Sequence[MemoryItem]) -> tuple[int, int]:
    """(distinct past tasks among the learnings, how many of them were successful); by session, else by item."""
    tasks: dict[str, bool] = {}
    for item in items:
        if item.kind is MemoryKind.LEARNING:
            key = f"s:{item.session_id}" if item.session_id else f"i:{item.project}\x1f{item.id}"
            tasks[key] = tasks.get(key, False) or item.outcome is Outcome.SUCCESSFUL
    return len(tasks), sum(tasks.values())


def suggest(items: Sequence[MemoryItem], task_type: TaskType | None = None) -> Approach:
    """The approach for ``items`` (in rank order) and the task type; NO_APPROACH without material."""
    found = material(items)
    first, second = ORDER.get(task_type, _NEUTRAL)
    taken: dict[str, int] = dict.fromkeys(found, 0)
    quoted: list[tuple[str, str]] = []

    def take(slot: str) -> None:
        pool = found[slot]
        if taken[slot] < len(pool):
            item = pool[taken[slot]]
            taken[slot] += 1
            quoted.append((item.id, _WRITERS[slot](item, task_type)))

    for slot in first:
        if slot in _WRITERS:
            take(slot)
    opening = FRAMING.get((task_type, OPEN)) if task_type else None
    closing = FRAMING.get((task_type, CLOSE)) if task_type else None
    framing = (opening is not None) + (closing is not None)
    for slot in second:
        if len(quoted) + framing >= MIN_STEPS:
            break
        take(slot)
    if not quoted:
        return NO_APPROACH
    steps: list[tuple[str | None, str]] = [(None, opening)] if opening else []
    steps.extend(quoted[: MAX_STEPS - framing])
    if closing:
        steps.append((None, closing))
    based_on, successful = past_tasks(items)
    return Approach(
        steps=tuple(s for _, s in steps),
        item_ids=tuple(i for i, _ in steps),
        based_on=based_on,
        successful=successful,
        task_type=task_type,
    )
