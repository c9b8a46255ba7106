"""Seed 001's suggested approach, built deterministically (no LLM) from what is being injected.

Three to five numbered steps, each one sentence: what worked before (the key insights of
successful learnings, best first), the established pattern to reuse (with its example file), the
principle to keep, and the pitfalls to avoid (warnings' mitigations, most severe first). Nothing is
invented: every step quotes an injected item, and the item ids travel with the steps.

The approach never leads with a low-confidence item: steps from items below ``MIN_LEAD_CONFIDENCE``
(seed 002's floor for injecting a pattern; 0.5 is also what an unrated item gets) come after the
others, and without any confident item there is no approach at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxbus.core.sections import (
    LEARNINGS,
    PATTERNS,
    PRINCIPLES,
    WARNINGS,
    first_sentence,
    mitigation,
    section_of,
    severity,
)
from ctxbus.memory.model import MemoryItem, Outcome, Severity

MAX_STEPS = 5
#: An item below this confidence never leads the approach (seed 002's floor for injecting a pattern).
MIN_LEAD_CONFIDENCE = 0.7
_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.HIGH: 1, Severity.MEDIUM: 2, Severity.LOW: 3}


@dataclass(frozen=True, slots=True)
class Approach:
    steps: tuple[str, ...]
    item_ids: tuple[str, ...]
    based_on: int
    successful: int

    @property
    def text(self) -> str:
        """``Based on N similar past tasks (k successful), recommend: 1) ... 2) ...`` (empty without steps)."""
        if not self.steps:
            return ""
        numbered = " ".join(f"{n}) {step}" for n, step in enumerate(self.steps, start=1))
        if self.based_on:
            plural = "task" if self.based_on == 1 else "tasks"
            return (
                f"Based on {self.based_on} similar past {plural} ({self.successful} successful), recommend: {numbered}"
            )
        return f"Recommended: {numbered}"


#: No suggested approach (not asked for, or nothing actionable).
NO_APPROACH = Approach((), (), 0, 0)


def _insight(item: MemoryItem) -> str:
    return first_sentence(item.key_insight or item.lesson_learned or item.content)


def suggest(items: Sequence[MemoryItem]) -> Approach:
    """The approach for ``items`` (in rank order); no steps when nothing actionable is there."""
    learnings = [i for i in items if section_of(i) == LEARNINGS]
    warnings = [i for i in items if section_of(i) == WARNINGS]
    patterns = [i for i in items if section_of(i) == PATTERNS]
    principles = [i for i in items if section_of(i) == PRINCIPLES]
    steps: list[tuple[str, str]] = []
    worked = [i for i in learnings if i.outcome is Outcome.SUCCESSFUL] or learnings
    for item in worked[:2]:
        steps.append((item.id, _insight(item).rstrip(".") + " (worked before)."))
    for item in patterns[:1]:
        where = f" ({item.example_reference})" if item.example_reference else ""
        steps.append(
            (
                item.id,
                f"Reuse the existing {first_sentence(item.title or item.content, 80).rstrip('.')} pattern{where}.",
            )
        )
    for item in principles[:1]:
        steps.append((item.id, f"Keep to: {first_sentence(item.content)}"))
    ordered = sorted(warnings, key=lambda w: _SEVERITY_ORDER[severity(w)])
    for item in ordered[: max(1, MAX_STEPS - len(steps))]:
        fix = mitigation(item)
        what = first_sentence(item.title or item.content, 100).rstrip(".")
        text = f"Watch out ({severity(item).value}): {what}" + (f"; instead: {first_sentence(fix)}" if fix else ".")
        steps.append((item.id, text if text.endswith((".", "…")) else text + "."))
    confidence = {i.id: i.confidence for i in items}
    confident = [s for s in steps if confidence[s[0]] >= MIN_LEAD_CONFIDENCE]
    steps = [*confident, *(s for s in steps if confidence[s[0]] < MIN_LEAD_CONFIDENCE)] if confident else []
    steps = steps[:MAX_STEPS]
    past = [i for i in items if i.kind.value == "learning"]
    return Approach(
        steps=tuple(s for _, s in steps),
        item_ids=tuple(i for i, _ in steps),
        based_on=len(past),
        successful=sum(1 for i in past if i.outcome is Outcome.SUCCESSFUL),
    )
