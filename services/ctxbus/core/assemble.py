"""The markdown context handed to an agent, built from ranked items within a budget.

Sections by kind (patterns in seed 002's format first), items in rank order
inside each, the task-aware suggested approach (``ctxbus.core.approach``) first
when asked. Both budgets hold: never more than ``max_chars`` characters nor
``max_tokens`` tokens (by the counter given).

Which items go in is the profile's budget plan (``ctxbus.core.budget``): the
preserved items first, then the others within their tier's share of the budget,
then the rest of any share to the items their tier kept out; an item that does
not fit whole is shortened when the profile allows compression, else skipped (a
smaller one after it may still fit). Without a plan the budget is one pool and
items go in whole. When the suggested approach leaves no room for even one item,
the approach is left out (``approach_dropped``): the items are the substance.
Only when not even the best item fits is its text cut at a
word boundary, with a visible marker, so an injection is not empty when there
was something to say (unless the budget cannot hold even a useful piece of the
best item, and then ``empty_reason`` says so). Every input item is either
included or listed in ``skipped`` with its reason; ``budget_report`` says what
each tier got and used, what was preserved, shortened and left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxbus.contract.payloads import TaskType
from ctxbus.core.approach import NO_APPROACH, Approach, suggest
from ctxbus.core.budget import OVER_BUDGET, TIER_BUDGET, WHOLE_BUDGET, BudgetPlan, Placement, TierUse, place
from ctxbus.core.ranking import RankedHit
from ctxbus.core.sections import is_cautionary, mitigation, section_of, severity
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome

TokenCounter = Callable[[str], int]

#: Default character budget of one injection.
DEFAULT_MAX_CHARS = 10_000
#: Default token budget of one injection (seed 001's ``max_tokens``).
DEFAULT_MAX_TOKENS = 2_000
#: Appended to the content of an item cut to fit.
TRUNCATION_MARKER = " …(truncated)"
#: smallest useful piece of a truncated item's text, in characters
MIN_TRUNCATED_CHARS = 20

#: Reasons in ``Assembly.skipped`` and ``Assembly.empty_reason`` (also OVER_BUDGET, TIER_BUDGET).
BUDGET_REASONS = (OVER_BUDGET, TIER_BUDGET)
DUPLICATE = "duplicate"
NO_ITEMS = "no_items"
BUDGET_TOO_SMALL = "budget_too_small"
#: the item's section was switched off (seed 001's include_* switches)
SECTION_EXCLUDED = "section_excluded"
#: every item's section was switched off
ALL_SECTIONS_EXCLUDED = "all_sections_excluded"
APPROACH_TITLE = "## Suggested Approach"

_WORD = re.compile(r"\S+")

SECTION_TITLES: dict[MemoryKind, str] = {
    MemoryKind.PATTERN: "## Learned Patterns (Auto-Injected)",
    MemoryKind.WARNING: "## Warnings",
    MemoryKind.PRINCIPLE: "## Principles",
    MemoryKind.LEARNING: "## Learnings From Past Sessions",
    MemoryKind.DECISION: "## Decisions",
    MemoryKind.CONVENTION: "## Conventions",
    MemoryKind.CODE_REF: "## Code References",
    MemoryKind.TEST_REF: "## Test References",
    MemoryKind.ATTEMPT: "## Past Attempts",
}


@dataclass(frozen=True, slots=True)
class Assembly:
    """The context to inject and how it was made.

    ``item_ids`` in rank order (the text groups them by kind); ``skipped`` holds (id, reason) for every
    input item left out; ``truncated`` is true when the one item shown was cut; ``compressed`` names
    the items shortened to fit; ``empty_reason`` says why ``text`` is empty (``no_items``, ``budget_too_small``).
    """

    text: str
    item_ids: tuple[str, ...]
    chars: int
    tokens: int
    skipped: tuple[tuple[str, str], ...] = ()
    truncated: bool = False
    empty_reason: str | None = None
    #: the suggested approach built from the chosen items (empty steps when not asked or nothing actionable)
    approach: Approach = NO_APPROACH
    #: the chosen items themselves, in rank order (a truncated or shortened item with its cut content)
    items: tuple[MemoryItem, ...] = ()
    #: ids of the items compression shortened to fit
    compressed: tuple[str, ...] = ()
    #: ids of the candidates the profile preserves (placed first, whatever their tier)
    preserved: tuple[str, ...] = ()
    #: each tier's weight, share of the item budget, use and item count (empty without tier weights)
    tiers: tuple[TierUse, ...] = ()
    #: the budget for items, in tokens, once headers and the approach are set aside (None: one pool)
    item_budget: int | None = None
    #: the profile whose plan spent the budget (None: one pool)
    profile: str | None = None
    #: the suggested approach was asked for but left out: with it not even one item fitted
    approach_dropped: bool = False

    @property
    def shortened(self) -> bool:
        """Whether any text in the context was cut or compressed."""
        return self.truncated or bool(self.compressed)

    def budget_report(self) -> dict[str, Any]:
        """What the budget did, as JSON-able values: tiers, preserved, compressed, left out and why."""
        return {
            "profile": self.profile,
            "item_budget": self.item_budget,
            "tiers": [t.as_dict() for t in self.tiers],
            "preserved": list(self.preserved),
            "compressed": list(self.compressed),
            "truncated": self.truncated,
            "approach_dropped": self.approach_dropped,
            "left_out": [{"id": i, "reason": r} for i, r in self.skipped],
        }


def pattern_block(item: MemoryItem) -> list[str]:
    """Seed 002's markdown for one learned pattern."""
    lines = [f"### {item.title or item.id}"]
    if item.domains:
        lines.append(f"- **Domain**: {', '.join(item.domains)}")
    lines.append(f"- **Confidence**: {item.confidence:.0%}")
    if item.success_rate is not None:
        lines.append(f"- **Success Rate**: {item.success_rate:.0%}")
    lines.append(f"- {item.content}")
    if item.example_reference:
        lines.append(f"- **Reference**: {item.example_reference}")
    return lines


def generic_block(item: MemoryItem) -> list[str]:
    """The markdown for one item of any other kind: title, content, outcome, insight, lesson, reference."""
    head = f"### {item.title}" if item.title else f"### {item.id}"
    lines = [head, f"- {item.content}"]
    if item.outcome is not None:
        lines.append(f"- **Outcome**: {item.outcome.value}")
    if item.key_insight:
        lines.append(f"- **Key insight**: {item.key_insight}")
    if item.lesson_learned:
        lines.append(f"- **Lesson**: {item.lesson_learned}")
    if item.example_reference:
        lines.append(f"- **Reference**: {item.example_reference}")
    return lines


def warning_block(item: MemoryItem) -> list[str]:
    """A warning with its severity and mitigation; a failed or partial session's learning is a "Past issue"."""
    if item.kind is MemoryKind.LEARNING:
        outcome = "failed: do not repeat" if item.outcome is Outcome.FAILED else "partial: only partly worked"
        lines = [f"### Past issue: {item.title or item.id}", f"- {item.content}", f"- **Outcome**: {outcome}"]
    else:
        lines = [f"### {item.title or item.id}", f"- {item.content}"]
    lines.append(f"- **Severity**: {severity(item).value}")
    fix = mitigation(item)
    if fix:
        lines.append(f"- **Mitigation**: {fix}")
    if item.example_reference:
        lines.append(f"- **Reference**: {item.example_reference}")
    return lines


def shown_as(item: MemoryItem) -> MemoryKind:
    """The section an item goes in: its kind, except that cautionary items (failed or partial
    sessions' learnings, warning beliefs) are warnings."""
    return MemoryKind.WARNING if is_cautionary(item) else item.kind


def item_block(item: MemoryItem) -> list[str]:
    """The markdown lines for one item, by its kind."""
    if item.kind is MemoryKind.PATTERN:
        return pattern_block(item)
    return warning_block(item) if is_cautionary(item) else generic_block(item)


def render(items: Sequence[MemoryItem], *, approach: bool = False, task_type: TaskType | None = None) -> str:
    """Markdown for ``items``: the suggested approach for the task type (when asked and there is one),
    then one section per kind, in the order of SECTION_TITLES."""
    out: list[str] = []
    steps = suggest(items, task_type).text if approach else ""
    if steps:
        out.extend([APPROACH_TITLE, "", steps, ""])
    for kind, title in SECTION_TITLES.items():
        members = [i for i in items if shown_as(i) is kind]
        if not members:
            continue
        out.extend([title, ""])
        for item in members:
            out.extend(item_block(item))
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n" if out else ""


def _fits(text: str, max_chars: int, max_tokens: int, count: TokenCounter) -> bool:
    return len(text) <= max_chars and count(text) <= max_tokens


def _cut_to_fit(
    item: MemoryItem, max_chars: int, max_tokens: int, count: TokenCounter, approach: bool, task_type: TaskType | None
) -> MemoryItem | None:
    """The item with its content cut at a word boundary so that it fits, or None if nothing useful fits.

    The cut keeps the content's own whitespace (code keeps its lines) up to the end of a word.
    """
    ends = [m.end() for m in _WORD.finditer(item.content)]
    lo, hi, best = 1, len(ends), None
    while lo <= hi:  # the longest prefix of whole words that fits
        mid = (lo + hi) // 2
        candidate = item.model_copy(update={"content": item.content[: ends[mid - 1]] + TRUNCATION_MARKER})
        if _fits(render([candidate], approach=approach, task_type=task_type), max_chars, max_tokens, count):
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    if best is None or len(best.content) - len(TRUNCATION_MARKER) < MIN_TRUNCATED_CHARS:
        return None
    return best


class _Units:
    """An item's share of the budget: its tokens, or its characters at the budget's token-per-character
    ratio when that is more (so the tighter of the two budgets is the one shared out)."""

    def __init__(self, max_chars: int, max_tokens: int, count: TokenCounter) -> None:
        self._ratio = max_tokens / max_chars
        self._count = count

    def __call__(self, text: str) -> int:
        return max(self._count(text), math.ceil(len(text) * self._ratio))


def _item_budget(
    items: Sequence[MemoryItem], max_tokens: int, units: _Units, approach: bool, task_type: TaskType | None
) -> int:
    """The budget left for items once their section titles and the approach (from all candidates) are set aside."""
    kinds = {shown_as(i) for i in items}
    overhead = [SECTION_TITLES[k] for k in SECTION_TITLES if k in kinds]
    steps = suggest(items, task_type).text if approach else ""
    if steps:
        overhead.extend([APPROACH_TITLE, steps])
    return max(0, max_tokens - units("\n\n".join(overhead) + "\n" * (2 * len(items))))


class _LineSums:
    """A text's tokens as the sum of its lines' tokens, each distinct line counted once.

    Exact for counters additive over lines, as the model's WordPiece tokenizer (it splits on
    whitespace first) and ``estimate_tokens`` are; assembly tries many texts that share most lines,
    so this counts each line once instead of every text whole.
    """

    def __init__(self, count: TokenCounter) -> None:
        self._count = count
        self._memo: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        total = 0
        for line in text.split("\n"):
            known = self._memo.get(line)
            if known is None:
                known = self._memo[line] = self._count(line)
            total += known
        return total


def assemble(
    ranked: Sequence[RankedHit],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    count_tokens: TokenCounter = estimate_tokens,
    include: Callable[[str], bool] | None = None,
    approach: bool = False,
    task_type: TaskType | None = None,
    budget: BudgetPlan = WHOLE_BUDGET,
) -> Assembly:
    """The markdown for ``ranked`` (in the order to try them) within both budgets; see the module docstring.

    ``include`` says which sections (``ctxbus.core.sections``: principles, patterns, learnings,
    warnings, reference) are wanted (default: all); ``approach`` adds seed 001's suggested approach
    for ``task_type``, built from the chosen items and counted in the budget; ``budget`` is the
    profile's plan (tier weights, how many of the first items are preserved, compression).

    The choices are made counting tokens line by line (``_LineSums``); the result is counted whole
    with ``count_tokens``, and should a counter that is not additive over lines put it over the
    budget, the choices are made again counting every text whole.
    Raises ValueError when a budget is not positive.
    """
    if max_chars <= 0 or max_tokens <= 0:
        raise ValueError("max_chars and max_tokens must be positive")
    options = (max_chars, max_tokens, include, approach, task_type, budget)
    result = _assemble(ranked, _LineSums(count_tokens), *options)
    tokens = count_tokens(result.text)
    if tokens > max_tokens:
        result = _assemble(ranked, count_tokens, *options)
        tokens = count_tokens(result.text)
    return replace(result, tokens=tokens)


def _assemble(
    ranked: Sequence[RankedHit],
    count_tokens: TokenCounter,
    max_chars: int,
    max_tokens: int,
    include: Callable[[str], bool] | None,
    approach: bool,
    task_type: TaskType | None,
    budget: BudgetPlan,
) -> Assembly:
    if not ranked:
        return Assembly("", (), 0, 0, empty_reason=NO_ITEMS)
    skipped: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    wanted: list[RankedHit] = []
    for hit in ranked:
        if include is not None and not include(section_of(hit.item)):
            skipped.append((hit.item.id, SECTION_EXCLUDED))
        else:
            wanted.append(hit)
    if not wanted:
        return Assembly("", (), 0, 0, skipped=tuple(skipped), empty_reason=ALL_SECTIONS_EXCLUDED)
    preserved_keys = {(h.item.project, h.item.id) for h in ranked[: budget.preserve]}
    distinct: list[RankedHit] = []
    for hit in wanted:
        key = (hit.item.project, hit.item.id)
        if key in seen:
            skipped.append((hit.item.id, DUPLICATE))
        else:
            seen.add(key)
            distinct.append(hit)
    # the preserved candidates first (the retriever already puts them there), each once
    ordered = [h for h in distinct if (h.item.project, h.item.id) in preserved_keys]
    kept = len(ordered)
    ordered += [h for h in distinct if (h.item.project, h.item.id) not in preserved_keys]
    units = _Units(max_chars, max_tokens, count_tokens)

    def place_all(with_approach: bool) -> Placement:
        def fits(items: Sequence[MemoryItem]) -> bool:
            text = render(items, approach=with_approach, task_type=task_type)
            return _fits(text, max_chars, max_tokens, count_tokens)

        return place(
            ordered,
            replace(budget, preserve=kept),
            item_budget=_item_budget([h.item for h in ordered], max_tokens, units, with_approach, task_type),
            cost=lambda item: units("\n".join(item_block(item))),
            fits=fits,
        )

    placement = place_all(approach)
    approach_dropped = False
    if approach and not placement.chosen:  # the items are the substance: the approach gives way first
        without = place_all(False)
        if without.chosen:
            placement, approach, approach_dropped = without, False, True
    skipped.extend((ordered[i].item.id, reason) for i, reason in placement.skipped)
    chosen = [item for _, item in placement.chosen]
    truncated = False
    if not chosen:
        first = _cut_to_fit(ordered[0].item, max_chars, max_tokens, count_tokens, approach, task_type)
        if first is not None:
            chosen, truncated = [first], True
            skipped.remove(next(s for s in skipped if s[0] == first.id and s[1] in BUDGET_REASONS))
    rank: dict[tuple[str, str], int] = {}
    for n, hit in enumerate(ranked):
        rank.setdefault((hit.item.project, hit.item.id), n)
    chosen.sort(key=lambda i: rank[(i.project, i.id)])
    text = render(chosen, approach=approach, task_type=task_type)
    return Assembly(
        text=text,
        item_ids=tuple(i.id for i in chosen),
        chars=len(text),
        tokens=count_tokens(text),
        skipped=tuple(skipped),
        truncated=truncated,
        empty_reason=None if chosen else BUDGET_TOO_SMALL,
        approach=suggest(chosen, task_type) if approach else NO_APPROACH,
        items=tuple(chosen),
        compressed=placement.compressed,
        preserved=placement.preserved,
        tiers=placement.tiers,
        item_budget=placement.item_budget,
        profile=budget.profile,
        approach_dropped=approach_dropped,
    )
