"""A lesson captured again strengthens the item it repeats (pure).

Captured items (``source`` ``captured``, see :mod:`ctxbus.capture`) carry deterministic ids: the same lesson
captured in another session arrives under the same id (or, worded the same, as an exact duplicate of another id).
Ingestion then keeps one item whose ``occurrences`` go up and whose conviction grows a step per repeat, up to a cap
below what a person's import starts near. The same session captured twice (at Stop, then at SessionEnd, or a replay
of the same events) counts once: a repeat is a capture from another session.
"""

from __future__ import annotations

from ctxbus.memory.model import FileRef, MemoryItem

#: conviction a captured item starts with: below an imported item's default (0.5), above the hooks' floor
#: (CTXBUS_HOOK_MIN_CONFIDENCE, 0.4), so it is injected from the start and earns or loses its place through outcomes
CAPTURED_CONFIDENCE = 0.45
#: conviction gained per repeat from another session
REPEAT_STEP = 0.05
#: the most conviction repeats alone can give a captured item (outcomes may move it further)
REPEAT_CAP = 0.65


def _session(item: MemoryItem) -> str | None:
    return item.provenance.session_id if item.provenance else item.session_id


def is_repeat(existing: MemoryItem, incoming: MemoryItem) -> bool:
    """Whether ``incoming`` is the lesson ``existing`` holds captured again, in another session."""
    if not (existing.captured and incoming.captured):
        return False
    return _session(existing) != _session(incoming) or _session(incoming) is None


def merged_files(existing: tuple[FileRef, ...], incoming: tuple[FileRef, ...]) -> tuple[FileRef, ...]:
    """Both items' files, by path; the newer hash of a path wins."""
    by_path = {f.path: f for f in existing}
    by_path.update({f.path: f for f in incoming})
    return tuple(by_path.values())


def repeat_confidence(existing: MemoryItem, incoming: MemoryItem) -> float:
    """The conviction of a lesson captured again: a step per new occurrence, within the cap, never lower."""
    best = max(existing.confidence, incoming.confidence)
    return max(best, min(REPEAT_CAP, best + REPEAT_STEP * incoming.occurrences))


def repeated(existing: MemoryItem, incoming: MemoryItem) -> MemoryItem:
    """``incoming`` as it is stored when it repeats ``existing``: counts summed, conviction a step higher (within
    the cap, never lower than either), the first capture's provenance kept, the files of both."""
    return incoming.model_copy(
        update={
            "occurrences": existing.occurrences + incoming.occurrences,
            "confidence": repeat_confidence(existing, incoming),
            "provenance": existing.provenance or incoming.provenance,
            "files": merged_files(existing.files, incoming.files),
            "created_at": min(existing.created_at, incoming.created_at),
        }
    )


def same_capture(existing: MemoryItem, incoming: MemoryItem) -> MemoryItem:
    """``incoming`` when the same session's capture arrives again: the counts and conviction it already earned
    stay (a session captured at Stop and again at SessionEnd is one occurrence)."""
    return incoming.model_copy(
        update={
            "occurrences": max(existing.occurrences, incoming.occurrences),
            "confidence": max(existing.confidence, incoming.confidence),
            "created_at": min(existing.created_at, incoming.created_at),
        }
    )


def consolidated(existing: MemoryItem, incoming: MemoryItem) -> MemoryItem:
    """What is stored when captured ``incoming`` meets captured ``existing`` under the same id (non-captured
    items: ``incoming`` untouched, as before)."""
    if not (existing.captured and incoming.captured):
        return incoming
    return repeated(existing, incoming) if is_repeat(existing, incoming) else same_capture(existing, incoming)
