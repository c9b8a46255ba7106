"""How captured items are judged against the labelled corpus (pure; ``ctxbus bench capture``).

- An item is **correct** when it comes from a session with a lesson of a compatible kind whose every
  ``must_mention`` substring it contains (case-insensitive), and that lesson is not already matched by another item
  of the session: a second item of the same lesson is not correct (consolidation makes it one item). Items and
  lessons are paired by a maximum matching, so the order items come in cannot cost a pairing.
- **Lesson recall**: lessons matched by an item.
- **Secrets stored**: planted strings (``secrets``) found verbatim in any text an item stores.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxbus.memory.model import MemoryItem

#: lesson kind -> the capture rules whose items can hold it
COMPATIBLE: dict[str, frozenset[str]] = {
    "failure_fix": frozenset({"failure_fix"}),
    "episode": frozenset({"episode"}),
    "correction": frozenset({"correction", "remember"}),
    "remember": frozenset({"remember", "correction"}),
}


@dataclass(frozen=True, slots=True)
class Lesson:
    id: str
    kind: str
    must_mention: tuple[str, ...]
    gist: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Lesson:
        return cls(
            str(row["id"]), str(row["kind"]), tuple(str(m) for m in row.get("must_mention", ())), row.get("gist", "")
        )


def item_text(item: MemoryItem) -> str:
    """Everything an item says (what a reader, or a search, sees)."""
    return (
        " ".join(t for t in (item.title, item.content, item.key_insight, item.lesson_learned, item.mitigation) if t)
        + " "
        + " ".join(f.path for f in item.files)
    )


def rule_of(item: MemoryItem) -> str:
    return item.provenance.rule if item.provenance else ""


def holds(item: MemoryItem, lesson: Lesson) -> bool:
    """Whether ``item`` states ``lesson``: a compatible kind, every must_mention in its text."""
    if rule_of(item) not in COMPATIBLE.get(lesson.kind, frozenset()):
        return False
    text = item_text(item).casefold()
    return all(m.casefold() in text for m in lesson.must_mention)


def matching(items: Sequence[MemoryItem], lessons: Sequence[Lesson]) -> dict[int, int]:
    """A maximum pairing item index -> lesson index of items that hold lessons (each at most once)."""
    edges = [[j for j, lesson in enumerate(lessons) if holds(item, lesson)] for item in items]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(items)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


@dataclass(frozen=True, slots=True)
class SessionScore:
    file: str
    items: int
    correct: int
    lessons: int
    recalled: int
    #: (rule, title) of items that matched no lesson
    wrong: tuple[tuple[str, str], ...]
    #: ids of lessons no item held
    missed: tuple[str, ...]
    secrets_found: int
    #: lesson id -> the id of the item that holds it
    holders: Mapping[str, str]


def score_session(
    file: str, items: Sequence[MemoryItem], lessons: Sequence[Lesson], secrets: Sequence[str]
) -> SessionScore:
    pairs = matching(items, lessons)
    wrong = tuple((rule_of(items[i]), items[i].title[:100]) for i in range(len(items)) if i not in pairs)
    matched = set(pairs.values())
    missed = tuple(lesson.id for j, lesson in enumerate(lessons) if j not in matched)
    stored = "\n".join(json.dumps(item.model_dump(mode="json")) + item_text(item) for item in items)
    found = sum(1 for s in dict.fromkeys(secrets) if s and s in stored)
    return SessionScore(
        file,
        len(items),
        len(pairs),
        len(lessons),
        len(matched),
        wrong,
        missed,
        found,
        {lessons[j].id: items[i].id for i, j in pairs.items()},
    )


def rate(k: int, n: int) -> float | None:
    return k / n if n else None
