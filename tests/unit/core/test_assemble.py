from __future__ import annotations

import random

import pytest

from ctxbus.core.assemble import TRUNCATION_MARKER, assemble, render
from ctxbus.core.ranking import RankedHit
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome


def pattern(
    i: str, content: str = "Use pydantic.BaseModel with frozen=True for immutable events", **kw: object
) -> MemoryItem:
    fields: dict[str, object] = {
        "id": i,
        "project": "p",
        "kind": MemoryKind.PATTERN,
        "title": f"Title {i}",
        "content": content,
        "domains": ("event_schemas",),
        "confidence": 0.92,
        "success_rate": 0.87,
    }
    fields.update(kw)
    return MemoryItem.model_validate(fields)


def hits(*items: MemoryItem) -> list[RankedHit]:
    return [RankedHit(item=i, score=1.0 - n / 100) for n, i in enumerate(items)]


def test_patterns_use_seed_002_markdown_exactly() -> None:
    item = pattern(
        "onex-event-validation",
        title="ONEX Event Schema Validation",
        example_reference="src/omniclaude/hooks/schemas.py:45",
    )
    assert render([item]) == (
        "## Learned Patterns (Auto-Injected)\n"
        "\n"
        "### ONEX Event Schema Validation\n"
        "- **Domain**: event_schemas\n"
        "- **Confidence**: 92%\n"
        "- **Success Rate**: 87%\n"
        "- Use pydantic.BaseModel with frozen=True for immutable events\n"
        "- **Reference**: src/omniclaude/hooks/schemas.py:45\n"
    )


def test_kinds_get_their_own_sections_in_a_fixed_order() -> None:
    warning = MemoryItem(id="w", project="p", kind=MemoryKind.WARNING, title="Token expiry", content="Check expiry")
    learning = MemoryItem(
        id="l", project="p", kind=MemoryKind.LEARNING, content="Integration tests first", outcome=Outcome.SUCCESSFUL
    )
    text = assemble(hits(learning, warning, pattern("a"))).text
    assert text.index("## Learned Patterns") < text.index("## Warnings") < text.index("## Learnings")
    assert "- **Outcome**: successful" in text


def test_empty_input_says_why() -> None:
    result = assemble([])
    assert result.text == "" and result.empty_reason == "no_items" and result.item_ids == ()


def test_an_item_that_does_not_fit_is_skipped_and_a_smaller_one_still_fits() -> None:
    big = pattern("big", content="word " * 400)
    small = pattern("small", content="short")
    result = assemble(hits(pattern("first"), big, small), max_chars=600)
    assert result.item_ids == ("first", "small")
    assert ("big", "over_budget") in result.skipped
    assert result.chars <= 600 and not result.truncated


def test_when_nothing_fits_whole_the_best_item_is_cut_with_a_marker() -> None:
    result = assemble(hits(pattern("big", content="lorem ipsum " * 500)), max_chars=800)
    assert result.item_ids == ("big",) and result.truncated
    assert TRUNCATION_MARKER.strip() in result.text and len(result.text) <= 800


def test_a_budget_too_small_for_anything_useful_says_so() -> None:
    result = assemble(hits(pattern("a")), max_chars=60)
    assert result.text == "" and result.empty_reason == "budget_too_small"


def test_invalid_budgets_are_refused() -> None:
    with pytest.raises(ValueError):
        assemble(hits(pattern("a")), max_chars=0)


@pytest.mark.parametrize("seed", range(40))
def test_budgets_are_never_exceeded(seed: int) -> None:
    rng = random.Random(seed)
    kinds = list(MemoryKind)
    items = [
        MemoryItem(
            id=f"i{n}",
            project="p",
            kind=rng.choice(kinds),
            title=f"T{n}",
            content=" ".join(
                rng.choice(["alpha", "beta", "gamma-delta", "x", "ünïcode", "path/to/file.py:12"])
                for _ in range(rng.randint(1, 300))
            ),
            confidence=rng.random(),
        )
        for n in range(rng.randint(1, 30))
    ]
    max_chars, max_tokens = rng.randint(50, 6000), rng.randint(10, 1500)
    result = assemble(hits(*items), max_chars=max_chars, max_tokens=max_tokens)
    assert len(result.text) == result.chars <= max_chars
    assert estimate_tokens(result.text) == result.tokens <= max_tokens
    assert len(set(result.item_ids)) == len(result.item_ids)
    assert set(result.item_ids) | {s[0] for s in result.skipped} == {i.id for i in items}
