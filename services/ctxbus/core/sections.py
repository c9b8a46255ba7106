"""Which section of a context an item belongs to, and what a warning says (seed 001 REQ-021.5).

Warnings come from three places: warning items, learnings of failed or partial sessions ("Past
issue: ..."), and warning beliefs (principles tagged ``warning``/``avoid``/``pitfall``/
``anti-pattern``). Each gets a severity (its own, else derived) and a mitigation (its own, else the
learning's lesson).
"""

from __future__ import annotations

from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome, Severity

PRINCIPLES = "principles"
PATTERNS = "patterns"
LEARNINGS = "learnings"
WARNINGS = "warnings"
#: decisions, conventions, code and test references, past attempts
REFERENCE = "reference"
SUGGESTED_APPROACH = "suggested_approach"

#: Tags that make a principle a warning belief.
WARNING_TAGS = frozenset({"warning", "avoid", "pitfall", "anti-pattern", "antipattern"})
#: Outcomes whose learnings are shown as warnings (and never recommended).
CAUTIONARY_OUTCOMES = frozenset({Outcome.FAILED, Outcome.PARTIAL})
#: A warning belief this convinced is high severity (seed 001).
HIGH_CONVICTION = 0.8


def is_warning_belief(item: MemoryItem) -> bool:
    return item.kind is MemoryKind.PRINCIPLE and bool(WARNING_TAGS.intersection(item.tags))


def is_cautionary(item: MemoryItem) -> bool:
    """Shown and ranked as a warning: what not to do (or to do with care)."""
    if item.kind is MemoryKind.WARNING or is_warning_belief(item):
        return True
    return item.kind is MemoryKind.LEARNING and item.outcome in CAUTIONARY_OUTCOMES


def section_of(item: MemoryItem) -> str:
    if is_cautionary(item):
        return WARNINGS
    if item.kind is MemoryKind.PRINCIPLE:
        return PRINCIPLES
    if item.kind is MemoryKind.PATTERN:
        return PATTERNS
    if item.kind is MemoryKind.LEARNING:
        return LEARNINGS
    return REFERENCE


def severity(item: MemoryItem) -> Severity:
    """The item's own severity, else: failed session high, partial medium, warning belief by conviction."""
    if item.severity is not None:
        return item.severity
    if item.kind is MemoryKind.LEARNING:
        return Severity.HIGH if item.outcome is Outcome.FAILED else Severity.MEDIUM
    if is_warning_belief(item):
        return Severity.HIGH if item.confidence > HIGH_CONVICTION else Severity.MEDIUM
    return Severity.MEDIUM


def mitigation(item: MemoryItem) -> str | None:
    return item.mitigation or item.lesson_learned


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text`` (at most ``limit`` characters, cut at a word with an ellipsis)."""
    flat = " ".join(text.split())
    for stop in (". ", "; ", "! ", "? "):
        at = flat.find(stop)
        if 0 < at < limit:
            flat = flat[: at + 1]
            break
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"
