"""Assembly under a profile's budget plan: tier shares, preserved items, compression, every decision reported."""

from __future__ import annotations

import random

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.approach import NO_APPROACH
from ctxbus.core.assemble import OVER_BUDGET, TIER_BUDGET, TokenCounter, assemble
from ctxbus.core.budget import COMPRESSION_MARKER, BudgetPlan, budget_plan
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import HELPER, IMPLEMENTER, Tier
from ctxbus.core.ranking import RankedHit
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem, MemoryKind

T, P, G = Tier.TASK, Tier.PROJECT, Tier.GLOBAL
WORDS: TokenCounter = lambda text: len(text.split())  # noqa: E731
IMPLEMENTER_WEIGHTS = {T: 0.5, P: 0.3, G: 0.2}
REVIEWER_WEIGHTS = {T: 0.4, P: 0.4, G: 0.2}


def principle(item_id: str, content: str) -> MemoryItem:
    return MemoryItem(id=item_id, project="p", kind=MemoryKind.PRINCIPLE, title=item_id, content=content)


def hit(item_id: str, tier: Tier, rank: int, content: str = "") -> RankedHit:
    # 10 words in the markdown: "### T1" (2) and "- w0 ... w6." (8)
    text = content or " ".join(f"w{k}" for k in range(7)) + "."
    return RankedHit(principle(item_id, text), 1.0 - rank / 100, {f"tier_{tier.value}": 1.0})


def interleaved(n: int = 8) -> list[RankedHit]:
    """P1, T1, P2, T2, ... : project and task items of the same size, alternating in rank order."""
    out: list[RankedHit] = []
    for k in range(1, n + 1):
        out.append(hit(f"P{k}", P, len(out)))
        out.append(hit(f"T{k}", T, len(out)))
    return out


def test_the_item_budget_is_split_by_tier_weight_and_an_empty_tier_wastes_nothing() -> None:
    # 100 tokens, 2 for the "## Principles" title: 98 for items; no global items, so task and project
    # split all of it 0.5 : 0.3 -> 61 and 37 (largest remainder)
    result = assemble(interleaved(), max_tokens=100, count_tokens=WORDS, budget=BudgetPlan(weights=IMPLEMENTER_WEIGHTS))
    assert result.item_budget == 98
    shares = {t.tier: t.allocated for t in result.tiers}
    assert shares == {T: 61, P: 37, G: 0}
    assert sorted(result.item_ids) == sorted(["T1", "T2", "T3", "T4", "T5", "T6", "P1", "P2", "P3"])
    uses = {t.tier: (t.used, t.items) for t in result.tiers}
    assert uses == {T: (60, 6), P: (30, 3), G: (0, 0)}
    assert result.tokens == WORDS(result.text) <= 100
    assert dict(result.skipped) == dict.fromkeys(["P4", "P5", "P6", "P7", "P8", "T7", "T8"], TIER_BUDGET)


def test_different_weights_choose_differently_from_the_same_items() -> None:
    implementer = assemble(
        interleaved(), max_tokens=100, count_tokens=WORDS, budget=BudgetPlan(weights=IMPLEMENTER_WEIGHTS)
    )
    reviewer = assemble(interleaved(), max_tokens=100, count_tokens=WORDS, budget=BudgetPlan(weights=REVIEWER_WEIGHTS))
    assert {t.tier: t.allocated for t in reviewer.tiers} == {T: 49, P: 49, G: 0}
    # 4 + 4 within the shares, then what is left (18 tokens) goes to the best ranked item kept out: P5
    assert reviewer.item_ids == ("P1", "T1", "P2", "T2", "P3", "T3", "P4", "T4", "P5")
    assert implementer.item_ids != reviewer.item_ids


def test_without_weights_the_budget_is_one_pool_in_rank_order() -> None:
    result = assemble(interleaved(), max_tokens=100, count_tokens=WORDS)
    assert result.item_ids == ("P1", "T1", "P2", "T2", "P3", "T3", "P4", "T4", "P5")
    assert result.tiers == () and result.item_budget is None
    assert all(reason == OVER_BUDGET for _, reason in result.skipped)


def test_preserved_items_go_in_whatever_their_tiers_share() -> None:
    # ten project items want more than the whole budget: the task tier (weight 0) gets only what is left
    hits = [hit("T1", T, 0), *[hit(f"P{k}", P, k) for k in range(1, 11)], hit("T2", T, 11)]
    plan = BudgetPlan(weights={T: 0.0, P: 1.0, G: 0.0}, preserve=1)
    result = assemble(hits, max_tokens=100, count_tokens=WORDS, budget=plan)
    assert result.preserved == ("T1",) and "T1" in result.item_ids  # the task tier's weight is 0
    assert "T2" not in result.item_ids and ("T2", TIER_BUDGET) in result.skipped
    without = assemble(hits, max_tokens=100, count_tokens=WORDS, budget=BudgetPlan(weights={T: 0.0, P: 1.0, G: 0.0}))
    assert "T1" not in without.item_ids and ("T1", TIER_BUDGET) in without.skipped


def test_the_preserved_items_are_the_first_given_even_when_the_budget_is_short() -> None:
    hits = [hit(f"P{k}", P, k) for k in range(6)]
    result = assemble(
        hits, max_tokens=35, count_tokens=WORDS, budget=BudgetPlan(weights=IMPLEMENTER_WEIGHTS, preserve=3)
    )
    assert result.preserved == ("P0", "P1", "P2")
    assert result.item_ids == ("P0", "P1", "P2") or result.item_ids == ("P0", "P1")  # only the budget limits them
    assert all(item_id not in result.item_ids for item_id in ("P3", "P4", "P5"))


LONG = (
    "Validate every token at the API boundary before any handler runs. "
    "Reject expired and malformed tokens with a 401 and a reason the client can log. "
    "For example, a token signed with an old key should say so instead of failing silently. "
    "Keep the validation in one middleware so no route can forget it. "
    "Log the token id, never the token itself."
)


def long_hits(n: int = 6) -> list[RankedHit]:
    return [hit(f"L{k}", P, k, f"Rule {k}. {LONG}") for k in range(n)]


def test_compression_fits_more_distinct_items_when_the_budget_is_tight() -> None:
    plan = BudgetPlan(weights=IMPLEMENTER_WEIGHTS, compression=True, aggressiveness=0.6)
    whole = assemble(long_hits(), max_tokens=300, budget=BudgetPlan(weights=IMPLEMENTER_WEIGHTS))
    short = assemble(long_hits(), max_tokens=300, budget=plan)
    assert len(short.item_ids) > len(whole.item_ids)
    assert short.compressed and set(short.compressed) <= set(short.item_ids)
    assert short.text.count(COMPRESSION_MARKER) == len(short.compressed) and short.shortened
    assert whole.compressed == () and COMPRESSION_MARKER not in whole.text and not whole.shortened
    assert short.tokens == estimate_tokens(short.text) <= 300
    again = assemble(long_hits(), max_tokens=300, budget=plan)
    assert again.text == short.text and again.compressed == short.compressed  # deterministic


def test_the_best_ranked_items_stay_whole_and_only_what_would_be_dropped_is_shortened() -> None:
    plan = BudgetPlan(compression=True, aggressiveness=0.6)
    result = assemble(long_hits(), max_tokens=300, budget=plan)
    assert result.item_ids[0] not in result.compressed
    assert result.items[0].content == long_hits()[0].item.content


def test_nothing_is_compressed_when_the_budget_is_not_tight() -> None:
    plan = BudgetPlan(weights=IMPLEMENTER_WEIGHTS, compression=True, aggressiveness=0.6)
    result = assemble(long_hits(), max_tokens=5_000, budget=plan)
    assert len(result.item_ids) == 6 and result.compressed == () and COMPRESSION_MARKER not in result.text


def test_the_helper_profile_never_compresses() -> None:
    implementer = budget_plan(plan_retrieval(IMPLEMENTER, None, "x"))
    helper = budget_plan(plan_retrieval(HELPER, None, "x"))
    assert assemble(long_hits(), max_tokens=300, budget=implementer).compressed
    result = assemble(long_hits(), max_tokens=300, budget=helper)
    assert result.compressed == () and COMPRESSION_MARKER not in result.text
    assert all(i.content == h.item.content for i, h in zip(result.items, long_hits(), strict=False))


def test_the_budget_report_says_what_happened() -> None:
    plan = BudgetPlan(weights=IMPLEMENTER_WEIGHTS, preserve=1, compression=True, aggressiveness=0.6, profile="x")
    result = assemble(long_hits(), max_tokens=300, budget=plan)
    report = result.budget_report()
    assert report["profile"] == "x" and report["preserved"] == ["L0"]
    assert report["compressed"] == list(result.compressed)
    assert [t["tier"] for t in report["tiers"]] == ["task", "project", "global"]
    assert report["left_out"] == [{"id": i, "reason": r} for i, r in result.skipped]


@pytest.mark.parametrize("seed", range(120))
def test_a_plan_never_breaks_either_budget_and_accounts_for_every_item(seed: int) -> None:
    rng = random.Random(seed)
    hits = []
    for n in range(rng.randint(1, 25)):
        tier = rng.choice(list(Tier))
        words = " ".join(
            rng.choice(["alpha", "beta.", "gamma", "e.g.", "code\n    x = 1", "\n\n"])
            for _ in range(rng.randint(1, 200))
        )
        hits.append(hit(f"i{n}", tier, n, words + " end."))
    weights = {t: rng.random() for t in Tier}
    plan = BudgetPlan(
        weights=rng.choice([None, weights]),
        preserve=rng.randint(0, 5),
        compression=rng.random() < 0.7,
        aggressiveness=rng.random(),
    )
    max_chars, max_tokens = rng.randint(50, 8_000), rng.randint(20, 2_000)
    result = assemble(hits, max_chars=max_chars, max_tokens=max_tokens, budget=plan, approach=rng.random() < 0.5)
    assert len(result.text) == result.chars <= max_chars
    assert estimate_tokens(result.text) == result.tokens <= max_tokens
    included, skipped = list(result.item_ids), [i for i, _ in result.skipped]
    assert sorted(included + skipped) == sorted(h.item.id for h in hits)
    assert set(result.compressed) <= set(included)
    if not plan.compresses:
        assert result.compressed == ()


def test_when_the_approach_leaves_no_room_for_any_item_the_approach_goes_not_the_items() -> None:
    item = MemoryItem(
        id="reset",
        project="p",
        kind=MemoryKind.PATTERN,
        title="Password reset invalidates sessions",
        content="After a password reset, revoke every refresh token and clear the session cache before login.",
        confidence=0.92,
        example_reference="src/auth/reset.py:45",
    )
    alone = assemble([RankedHit(item, 1.0)], max_chars=300)
    with_approach = assemble([RankedHit(item, 1.0)], max_chars=300, approach=True, task_type=TaskType.BUGFIX)
    assert alone.item_ids == ("reset",) and not alone.truncated
    assert with_approach.item_ids == ("reset",) and not with_approach.truncated
    assert with_approach.approach_dropped and with_approach.approach == NO_APPROACH
    assert "## Suggested Approach" not in with_approach.text and with_approach.budget_report()["approach_dropped"]
    roomy = assemble([RankedHit(item, 1.0)], approach=True, task_type=TaskType.BUGFIX)
    assert not roomy.approach_dropped and roomy.text.startswith("## Suggested Approach")


@pytest.mark.parametrize("max_tokens", [5, 12, 20, 40])
def test_a_counter_not_additive_over_lines_still_never_breaks_the_budget(max_tokens: int) -> None:
    per_text: TokenCounter = lambda text: len(text) // 40  # noqa: E731  (line by line it counts less)
    result = assemble(long_hits(), max_tokens=max_tokens, count_tokens=per_text, approach=True)
    assert result.tokens == per_text(result.text) <= max_tokens
    assert result.item_ids  # something fits at every one of these budgets
