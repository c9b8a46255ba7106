"""Assembly and what the injector builds around it (sections, the suggested approach, seed 001's document,
the fingerprint, the ranking) on memories filled with adversarial text: within the time budget."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given

from ctxbus.contract.payloads import MAX_CONTEXT_BYTES
from ctxbus.core.approach import suggest
from ctxbus.core.assemble import assemble, render
from ctxbus.core.fingerprint import fingerprint
from ctxbus.core.prime import TaskContext, prime_document
from ctxbus.core.profiles import IMPLEMENTER
from ctxbus.core.ranking import RankedHit, rank
from ctxbus.core.sections import first_sentence
from ctxbus.memory.model import MAX_CONTENT_CHARS, MemoryItem, MemoryKind, Outcome
from ctxbus.ports import SearchHit

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
    valid_unicode,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
KINDS = (MemoryKind.PATTERN, MemoryKind.LEARNING, MemoryKind.WARNING, MemoryKind.PRINCIPLE, MemoryKind.DECISION)


def memories(text: str) -> list[MemoryItem]:
    """``text`` spread over items as large as the memory model allows (its length in all, one item at least)."""
    out = []
    for n in range(max(1, -(-len(text) // MAX_CONTENT_CHARS))):
        part = text[n * MAX_CONTENT_CHARS : (n + 1) * MAX_CONTENT_CHARS]
        out.append(
            MemoryItem(
                id=f"m{n}",
                project="p",
                kind=KINDS[n % len(KINDS)],
                title=part[:500],
                content=part.strip() or "x",
                key_insight=part[:2_000] or None,
                lesson_learned=part[-2_000:] or None,
                outcome=Outcome.FAILED if n == 1 else None,
                example_reference=part[:1_000] or None,
                created_at=NOW,
                updated_at=NOW,
            )
        )
    return out


Step = Callable[[list[MemoryItem], list[RankedHit], str], object]
TASK = TaskContext("bugfix", 0.5, "auth", "implementer", "f")
STEPS: dict[str, Step] = {
    "assemble at the default budget": lambda items, hits, text: assemble(hits),
    "assemble at the largest budget": lambda items, hits, text: assemble(
        hits, max_chars=MAX_CONTEXT_BYTES, max_tokens=100_000, approach=True
    ),
    "render": lambda items, hits, text: render(items, approach=True),
    "first sentence": lambda items, hits, text: first_sentence(text),
    "suggest": lambda items, hits, text: suggest(items),
    "prime document": lambda items, hits, text: prime_document(TASK, items, {}, suggest(items), token_count=1),
    "fingerprint": lambda items, hits, text: fingerprint(IMPLEMENTER, None, hits, mentioned_files=[text[:1_000]]),
    "rank": lambda items, hits, text: rank(
        [SearchHit(item=i, score=0.5, extra={"bm25": 1.0}) for i in items], domain="auth", now=NOW
    ),
}


def check_every_step(text: str) -> None:
    text = valid_unicode(text)
    items = memories(text)
    hits = [RankedHit(item=i, score=1.0 - n / 10) for n, i in enumerate(items)]
    for step in STEPS.values():
        assert_within_budget(step, items, hits, text)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: check_every_step(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_assembly_takes_any_text(text: str) -> None:
    with shapes_only():
        check_every_step(text)
