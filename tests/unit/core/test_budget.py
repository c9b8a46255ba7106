"""Seed 004's budget: tier shares split and redistributed exactly, extractive compression, plans from profiles."""

from __future__ import annotations

import random

import pytest

from ctxbus.core.budget import (
    COMPRESSION_MARKER,
    WHOLE_BUDGET,
    BudgetPlan,
    allocate,
    budget_plan,
    compress_item,
    profile_from,
    tier_of,
)
from ctxbus.core.extract import cut_at_word, lead_sentence, sentences, shorten
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import HELPER, IMPLEMENTER, REVIEWER, InvalidOverride, Tier, UnknownProfile
from ctxbus.core.ranking import RankedHit
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind

T, P, G = Tier.TASK, Tier.PROJECT, Tier.GLOBAL
SEED = {T: 0.5, P: 0.3, G: 0.2}


def test_the_budget_splits_by_weight_when_every_tier_wants_more() -> None:
    assert allocate(SEED, 1000, {T: 5000, P: 5000, G: 5000}) == {T: 500, P: 300, G: 200}


def test_a_tier_without_items_gets_nothing_and_its_share_goes_to_the_others_by_weight() -> None:
    assert allocate(SEED, 1000, {T: 5000, P: 5000, G: 0}) == {T: 625, P: 375, G: 0}
    assert allocate(SEED, 1000, {T: 0, P: 0, G: 5000}) == {T: 0, P: 0, G: 1000}


def test_a_tier_that_needs_less_gives_the_rest_to_the_others_again_by_weight() -> None:
    # task needs 100 of its 500: the other 900 split 0.3 : 0.2
    assert allocate(SEED, 1000, {T: 100, P: 5000, G: 5000}) == {T: 100, P: 540, G: 360}
    # then project needs only 200 of its 540: global gets everything else
    assert allocate(SEED, 1000, {T: 100, P: 200, G: 5000}) == {T: 100, P: 200, G: 700}


def test_when_everything_fits_every_tier_gets_what_it_needs() -> None:
    assert allocate(SEED, 1000, {T: 10, P: 20, G: 30}) == {T: 10, P: 20, G: 30}


def test_a_tier_of_zero_weight_gets_no_share() -> None:
    assert allocate({T: 0.0, P: 1.0, G: 0.0}, 100, {T: 50, P: 500, G: 50}) == {T: 0, P: 100, G: 0}
    with pytest.raises(ValueError):
        allocate(SEED, -1, {})


@pytest.mark.parametrize("seed", range(200))
def test_shares_are_exact_whole_numbers_never_above_demand(seed: int) -> None:
    rng = random.Random(seed)
    weights = {t: rng.choice([0.0, rng.random()]) for t in Tier}
    weights[rng.choice(list(Tier))] += 0.01
    demand = {t: rng.choice([0, rng.randint(0, 3000)]) for t in Tier}
    budget = rng.randint(0, 4000)
    shares = allocate(weights, budget, demand)
    wanted = sum(d for t, d in demand.items() if weights[t] > 0)
    assert sum(shares.values()) == min(budget, wanted)
    assert all(0 <= shares[t] <= demand[t] for t in Tier)
    assert all(shares[t] == 0 for t in Tier if weights[t] == 0)


def item(item_id: str, content: str = "Some content.", **fields: object) -> MemoryItem:
    values: dict[str, object] = {"id": item_id, "project": "p", "kind": MemoryKind.PRINCIPLE, "content": content}
    values.update(fields)
    return MemoryItem.model_validate(values)


def test_the_tier_is_the_one_the_retriever_scored_else_the_items() -> None:
    scored = RankedHit(item("a"), 1.0, {"tier_task": 1.0, "tier_weight": 0.5})
    assert tier_of(scored) is T
    assert tier_of(RankedHit(item("b"), 1.0)) is P
    assert tier_of(RankedHit(item("c", project=GLOBAL_PROJECT), 1.0)) is G
    assert tier_of(RankedHit(item("d", tags=("task:t-1",)), 1.0), "t-1") is T


def test_the_plan_carries_the_profiles_weights_preservation_and_compression() -> None:
    plan = budget_plan(plan_retrieval(IMPLEMENTER, None, "anything"))
    assert plan.weights == {T: 0.5, P: 0.3, G: 0.2}
    assert plan.preserve == 6 and plan.compression and plan.aggressiveness == 0.6 and plan.compresses
    assert plan.profile == "implementer"
    helper = budget_plan(plan_retrieval(HELPER, None, "anything"))
    assert not helper.compression and not helper.compresses and helper.preserve == 2
    reviewer = budget_plan(plan_retrieval(REVIEWER, None, "anything"))
    assert reviewer.weights != plan.weights and reviewer.aggressiveness == 0.4
    assert not WHOLE_BUDGET.compresses and WHOLE_BUDGET.weights is None
    with pytest.raises(ValueError):
        BudgetPlan(preserve=-1)


def test_the_profile_resolves_with_the_requests_overrides_as_the_retriever_does() -> None:
    assert profile_from("squire", {}) is REVIEWER
    adjusted = profile_from("reviewer", {"allow_compression": "false", "task_weight": "0.9"})
    assert not adjusted.allow_compression and adjusted.task_weight == 0.9
    with pytest.raises(InvalidOverride, match="not JSON"):
        profile_from("reviewer", {"task_weight": "lots"})
    with pytest.raises(UnknownProfile):
        profile_from("wizard", {})


LONG = (
    "Rotate the refresh token on every use and revoke the whole family on reuse. "
    "Store only a hash of each token, never the token itself. "
    "For example, a leaked database dump then holds nothing an attacker can replay.\n\n"
    "```python\ndef rotate(token):\n    return issue(token.family)\n```\n\n"
    "Keep the rotation window short; clocks drift between the services."
)


def test_compression_keeps_the_leading_sentences_drops_examples_and_code_and_marks_the_text() -> None:
    short = compress_item(item("long", LONG), 0.6)
    assert short is not None and short.content.endswith(COMPRESSION_MARKER)
    kept = short.content.removesuffix(COMPRESSION_MARKER)
    assert kept.startswith("Rotate the refresh token on every use")
    assert "For example" not in kept and "def rotate" not in kept
    assert len(short.content) < len(LONG)
    again = compress_item(item("long", LONG), 0.6)
    assert again is not None and again.content == short.content  # deterministic
    gentle = compress_item(item("long", LONG), 0.2)
    assert gentle is not None and len(gentle.content) >= len(short.content)


def test_compression_never_cuts_a_word() -> None:
    words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa " * 20).split()
    one_sentence = " ".join(words)  # no sentence end: the cut must fall between words
    short = compress_item(item("w", one_sentence), 0.7)
    assert short is not None
    kept = short.content.removesuffix(COMPRESSION_MARKER).split()
    assert kept == words[: len(kept)] and 0 < len(kept) < len(words)


def test_what_cannot_be_shortened_is_left_alone() -> None:
    assert compress_item(item("s", "A short principle."), 0.9) is None
    assert compress_item(item("long", LONG), 0.0) is None  # aggressiveness 0 takes nothing away
    learning = item("l", "Short.", kind=MemoryKind.LEARNING, lesson_learned=LONG)
    shortened = compress_item(learning, 0.5)
    assert shortened is not None and shortened.content == "Short."
    assert shortened.lesson_learned is not None and shortened.lesson_learned.endswith(COMPRESSION_MARKER)


def test_sentences_ignore_abbreviations_and_cuts_fall_between_words() -> None:
    assert sentences("Use a pool, e.g. SQLAlchemy's. Then ping it! Done") == [
        "Use a pool, e.g. SQLAlchemy's.",
        "Then ping it!",
        "Done",
    ]
    assert lead_sentence("One two three. Four.") == "One two three."
    assert cut_at_word("alpha beta gamma", 12) == "alpha beta…"
    assert cut_at_word("alpha beta gamma", 12, ellipsis=False) == "alpha beta"
    assert cut_at_word("unbreakableword rest", 5) == "unbreakableword…"  # a word is never cut
    assert shorten("x" * 300, 0.3) is None  # one huge word: cannot be shortened without cutting it
