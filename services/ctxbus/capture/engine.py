"""The capture engine: a session's transcript or hook inputs -> candidate memory items (pure, clock injected)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ctxbus.capture.checks import forget_commands
from ctxbus.capture.items import FileHash, RedactText, SessionFacts, item_of, no_redaction
from ctxbus.capture.rules import lessons_of
from ctxbus.capture.steps import Step, transcript_steps
from ctxbus.memory.model import MemoryItem


def capture_steps(
    steps: Sequence[Step], facts: SessionFacts, *, redact: RedactText = no_redaction, file_hash: FileHash | None = None
) -> list[MemoryItem]:
    """The items a session's steps teach, one per lesson (ids deterministic: see :mod:`ctxbus.capture.items`)."""
    items: dict[str, MemoryItem] = {}
    try:
        for lesson in lessons_of(steps, facts.cwd):
            item = item_of(lesson, facts, redact=redact, file_hash=file_hash)
            items.setdefault(item.id, item)  # the same lesson twice in one session is one item
    finally:
        forget_commands()  # a session's command lines are read once per session: kept no longer
    return list(items.values())


def capture_transcript(
    data: bytes, facts: SessionFacts, *, redact: RedactText = no_redaction, file_hash: FileHash | None = None
) -> list[MemoryItem]:
    """The items a transcript's bytes teach (offsets in provenance are byte offsets into ``data``)."""
    steps, cwd = transcript_steps(data)
    if facts.cwd is None and cwd is not None:
        facts = replace(facts, cwd=cwd)
    return capture_steps(steps, facts, redact=redact, file_hash=file_hash)
