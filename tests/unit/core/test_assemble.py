"""Assembly: seed 002's markdown exactly, sections by kind, both budgets never exceeded, visible truncation."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import pytest

from ctxbus.core.assemble import (
    BUDGET_TOO_SMALL,
    DEFAULT_MAX_CHARS,
    DUPLICATE,
    NO_ITEMS,
    OVER_BUDGET,
    SECTION_TITLES,
    TRUNCATION_MARKER,
    Assembly,
    TokenCounter,
    assemble,
    render,
)
from ctxbus.core.ranking import RankedHit
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome


def pattern(item_id: str, content: str = "Use pydantic.BaseModel with frozen=True", **fields: object) -> MemoryItem:
    values: dict[str, object] = {
        "id": item_id,
        "project": "p",
        "kind": MemoryKind.PATTERN,
        "title": f"Title {item_id}",
        "content": content,
        "domains": ("event_schemas",),
        "confidence": 0.92,
        "success_rate": 0.87,
    }
    values.update(fields)
    return MemoryItem.model_validate(values)


def ranked(*items: MemoryItem) -> list[RankedHit]:
    return [RankedHit(item=i, score=1.0 - n / 1000) for n, i in enumerate(items)]


def seed_002_markdown(items: Sequence[MemoryItem]) -> str:
    """Seed 002's ``format_patterns_markdown``, transcribed, as the oracle for the pattern section."""
    output = ["## Learned Patterns (Auto-Injected)", ""]
    for p in items:
        output.append(f"### {p.title}")
        output.append(f"- **Domain**: {p.domains[0]}")
        output.append(f"- **Confidence**: {p.confidence:.0%}")
        output.append(f"- **Success Rate**: {p.success_rate:.0%}")
        output.append(f"- {p.content}")
        if p.example_reference:
            output.append(f"- **Reference**: {p.example_reference}")
        output.append("")
    return "\n".join(output)


SEED_PATTERNS = [
    pattern(
        "onex-event-validation",
        "Use pydantic.BaseModel with frozen=True for immutable events",
        title="ONEX Event Schema Validation",
        domains=("event_schemas",),
        confidence=0.92,
        success_rate=0.87,
        usage_count=15,
        example_reference="src/omniclaude/hooks/schemas.py:45",
    ),
    pattern(
        "hook-graceful-exit",
        "Always exit 0 from hook scripts, even on errors. Use JSON output with success flag.",
        title="Hook Graceful Exit Pattern",
        domains=("hooks",),
        confidence=0.95,
        success_rate=1.0,
        usage_count=23,
        example_reference="plugins/onex/hooks/lib/session_intelligence.py",
    ),
]


def test_the_seed_patterns_render_exactly_as_seed_002() -> None:
    result = assemble(ranked(*SEED_PATTERNS))
    assert result.text == (
        "## Learned Patterns (Auto-Injected)\n"
        "\n"
        "### ONEX Event Schema Validation\n"
        "- **Domain**: event_schemas\n"
        "- **Confidence**: 92%\n"
        "- **Success Rate**: 87%\n"
        "- Use pydantic.BaseModel with frozen=True for immutable events\n"
        "- **Reference**: src/omniclaude/hooks/schemas.py:45\n"
        "\n"
        "### Hook Graceful Exit Pattern\n"
        "- **Domain**: hooks\n"
        "- **Confidence**: 95%\n"
        "- **Success Rate**: 100%\n"
        "- Always exit 0 from hook scripts, even on errors. Use JSON output with success flag.\n"
        "- **Reference**: plugins/onex/hooks/lib/session_intelligence.py\n"
    )
    assert result.text == seed_002_markdown(SEED_PATTERNS)
    assert result.item_ids == ("onex-event-validation", "hook-graceful-exit")
    assert (result.chars, result.tokens) == (len(result.text), estimate_tokens(result.text))
    assert (result.skipped, result.truncated, result.empty_reason) == ((), False, None)


@pytest.mark.parametrize("seed", range(20))
def test_any_patterns_render_as_seed_002_does(seed: int) -> None:
    rng = random.Random(seed)
    items = [
        pattern(
            f"p{n}",
            " ".join(rng.choice(["use", "frozen", "models", "x.py:3", "**bold**"]) for _ in range(rng.randint(1, 20))),
            domains=(rng.choice(["hooks", "event_schemas", "api"]),),
            confidence=rng.random(),
            success_rate=rng.random(),
            example_reference=rng.choice([None, "", "src/a.py:1"]),
        )
        for n in range(rng.randint(1, 8))
    ]
    assert render(items) == seed_002_markdown(items)


def test_pattern_fields_that_are_missing_are_left_out() -> None:
    bare = pattern("bare", title="", domains=(), success_rate=None)
    assert render([bare]) == (
        "## Learned Patterns (Auto-Injected)\n\n"
        "### bare\n- **Confidence**: 92%\n- Use pydantic.BaseModel with frozen=True\n"
    )


def test_other_kinds_get_their_own_sections_after_the_patterns() -> None:
    def memory(item_id: str, kind: MemoryKind, **fields: object) -> MemoryItem:
        return MemoryItem.model_validate(
            {"id": item_id, "project": "p", "kind": kind, "content": f"{item_id} text"} | fields
        )

    items = [
        memory("l1", MemoryKind.LEARNING, title="OAuth2 support", outcome=Outcome.SUCCESSFUL),
        memory("w1", MemoryKind.WARNING, title="Token expiry", example_reference="src/auth/token.py"),
        memory("pr1", MemoryKind.PRINCIPLE),
        memory("d1", MemoryKind.DECISION, title="Use Kafka"),
        memory("c1", MemoryKind.CONVENTION, title="Naming"),
        pattern("pa1"),
        memory("pr2", MemoryKind.PRINCIPLE, title="Validate at boundaries"),
    ]
    result = assemble(ranked(*items))
    text = result.text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Learned Patterns (Auto-Injected)",
        "## Warnings",
        "## Principles",
        "## Learnings From Past Sessions",
        "## Decisions",
        "## Conventions",
    ]
    assert "### Token expiry\n- w1 text\n- **Severity**: medium\n- **Reference**: src/auth/token.py\n" in text
    assert "### OAuth2 support\n- l1 text\n- **Outcome**: successful\n" in text
    assert "## Principles\n\n### pr1\n- pr1 text\n\n### Validate at boundaries\n- pr2 text\n" in text
    assert result.item_ids == ("l1", "w1", "pr1", "d1", "c1", "pa1", "pr2")  # rank order
    assert set(SECTION_TITLES) == set(MemoryKind)


def test_no_items_gives_empty_text_and_a_reason() -> None:
    result = assemble([])
    assert result == Assembly(text="", item_ids=(), chars=0, tokens=0, empty_reason=NO_ITEMS)


def test_the_result_is_frozen() -> None:
    result = assemble(ranked(pattern("a")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("max_chars", "max_tokens"), [(0, 100), (100, 0), (-1, 100)])
def test_budgets_must_be_positive(max_chars: int, max_tokens: int) -> None:
    with pytest.raises(ValueError):
        assemble(ranked(pattern("a")), max_chars=max_chars, max_tokens=max_tokens)


def test_an_item_too_big_is_skipped_and_a_smaller_one_after_it_still_fits() -> None:
    big = pattern("big", "word " * 400)
    result = assemble(ranked(pattern("first"), big, pattern("small", "short")), max_chars=600)
    assert result.item_ids == ("first", "small")
    assert result.skipped == (("big", OVER_BUDGET),)
    assert not result.truncated and result.chars <= 600


def test_the_token_budget_binds_with_the_counter_given() -> None:
    words: TokenCounter = lambda text: len(text.split())  # noqa: E731
    items = [pattern(f"i{n}", "one two three four five") for n in range(10)]
    result = assemble(ranked(*items), max_tokens=60, count_tokens=words)
    assert 0 < len(result.item_ids) < 10
    assert result.tokens == words(result.text) <= 60
    assert all(reason == OVER_BUDGET for _, reason in result.skipped)


def test_the_default_character_budget_is_ten_thousand() -> None:
    items = [pattern(f"i{n:03d}", "lorem ipsum dolor " * 20) for n in range(200)]
    result = assemble(ranked(*items), max_tokens=10**9)
    assert DEFAULT_MAX_CHARS == 10_000
    assert DEFAULT_MAX_CHARS - 500 < result.chars <= DEFAULT_MAX_CHARS


def test_when_even_the_first_item_does_not_fit_it_is_cut_at_a_word_with_a_marker() -> None:
    content = "first line of the text\n    indented code line\n" + "lorem ipsum " * 500
    result = assemble(ranked(pattern("big", content), pattern("bigger", "x " * 5000)), max_chars=800)
    assert result.item_ids == ("big",) and result.truncated
    assert result.skipped == (("bigger", OVER_BUDGET),)
    assert len(result.text) == result.chars <= 800
    shown = result.text.split("- ", 4)[-1]  # the content line onwards
    assert shown.endswith(TRUNCATION_MARKER + "\n") and "…(truncated)" in TRUNCATION_MARKER
    kept = shown[: -len(TRUNCATION_MARKER + "\n")]
    assert content.startswith(kept) and content[len(kept)] == " "  # whole words, original whitespace kept
    assert "\n    indented code line\n" in kept


def test_a_budget_too_small_for_a_useful_piece_is_empty_with_a_reason() -> None:
    result = assemble(ranked(pattern("a", "some words " * 30), pattern("b", "other words " * 30)), max_chars=60)
    assert result.text == "" and result.item_ids == () and not result.truncated
    assert result.empty_reason == BUDGET_TOO_SMALL
    assert result.skipped == (("a", OVER_BUDGET), ("b", OVER_BUDGET))


def test_a_repeated_item_is_shown_once() -> None:
    a = pattern("a")
    result = assemble(ranked(a, pattern("b"), a))
    assert result.item_ids == ("a", "b") and result.skipped == (("a", DUPLICATE),)
    same_id_other_project = pattern("a", project="global")
    assert assemble(ranked(a, same_id_other_project)).item_ids == ("a", "a")


def _random_items(rng: random.Random) -> list[MemoryItem]:
    vocabulary = ["alpha", "beta", "gamma-delta", "x", "ünïcode", "日本", "path/to/file.py:12", "0xDEADBEEF", "\n"]
    return [
        MemoryItem(
            id=f"i{n}",
            project="p",
            kind=rng.choice(list(MemoryKind)),
            title=rng.choice(["", f"Title {n}", "T" * rng.randint(1, 300)]),
            content=" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 400))) + " end",
            domains=tuple(rng.sample(["auth", "db", "api"], rng.randint(0, 2))),
            confidence=rng.random(),
            success_rate=rng.choice([None, rng.random()]),
            example_reference=rng.choice([None, "src/x.py:1"]),
            outcome=rng.choice([None, *Outcome]),
        )
        for n in range(rng.randint(1, 30))
    ]


COUNTERS: list[TokenCounter] = [estimate_tokens, lambda t: len(t.split()), lambda t: len(t) // 3 + 1]


@pytest.mark.parametrize("seed", range(150))
def test_neither_budget_is_ever_exceeded(seed: int) -> None:
    """Hypothesis is not installed: a seeded random loop over items, budgets and token counters."""
    rng = random.Random(seed)
    items = _random_items(rng)
    count = COUNTERS[seed % len(COUNTERS)]
    max_chars, max_tokens = rng.randint(1, 12_000), rng.randint(1, 3_000)
    result = assemble(ranked(*items), max_chars=max_chars, max_tokens=max_tokens, count_tokens=count)
    assert len(result.text) == result.chars <= max_chars
    assert count(result.text) == result.tokens <= max_tokens
    included, skipped = list(result.item_ids), [item_id for item_id, _ in result.skipped]
    assert sorted(included + skipped) == sorted(i.id for i in items)  # every item accounted for, once
    assert included == [i.id for i in items if i.id in set(included)]  # in rank order
    if result.text:
        assert result.empty_reason is None and result.text.endswith("\n")
        assert not result.truncated or len(included) == 1
    else:
        assert result.empty_reason == BUDGET_TOO_SMALL


def test_a_failed_learning_is_shown_as_a_warning_not_a_recommendation() -> None:
    failed = MemoryItem(
        id="jwt-rewrite",
        project="p",
        kind=MemoryKind.LEARNING,
        title="Rewrote token refresh as a cron job",
        content="Refreshing tokens from a cron job raced with logins and logged users out.",
        outcome=Outcome.FAILED,
    )
    worked = failed.model_copy(update={"id": "ok", "title": "Refresh on 401", "outcome": Outcome.SUCCESSFUL})
    text = assemble([RankedHit(failed, 0.9), RankedHit(worked, 0.8)]).text
    warnings, learnings = text.index("## Warnings"), text.index("## Learnings From Past Sessions")
    assert warnings < text.index("### Past issue: Rewrote token refresh as a cron job") < learnings
    assert "- **Outcome**: failed: do not repeat" in text
    assert text.index("### Refresh on 401") > learnings
