"""Which prompts state a standing rule (after an assistant turn) and which are one-off redirections or small talk."""

from __future__ import annotations

import pytest

from ctxbus.capture.prompts import remembered, rule_in

RULES = [
    "no, use pnpm",
    "we use pnpm here, not npm",
    "Always run the migrations check before pushing.",
    "never commit directly to main",
    "don't use unwrap() in library code",
    "from now on, put new endpoints under app/api/v2",
    "please stop adding comments to every line",
    "migrations must never be edited once merged",
    "Tests should always use the factory helpers, not raw SQL inserts",
    "in this project we prefer composition over inheritance",
    "use Decimal for money, never float",
    "the convention here is snake_case for file names",
    "hardcoded credentials are not allowed",
    "No - that's not how we do it. We always wrap DB calls in a transaction.",
]
NOT_RULES = [
    "no, the other file",
    "don't worry about the docs for now",
    "never mind",
    "that's wrong, the test still fails",
    "can you always show me the diff?",
    "it never returns anything",
    "don't forget the changelog",
    "use the existing helper in utils.py",
    "it should return 404 not 500",
    "thanks, looks good",
    "run just the auth tests",
]


@pytest.mark.parametrize("prompt", RULES)
def test_standing_rules_are_read(prompt: str) -> None:
    assert rule_in(prompt) is not None


@pytest.mark.parametrize("prompt", NOT_RULES)
def test_one_offs_and_small_talk_are_not_rules(prompt: str) -> None:
    assert rule_in(prompt) is None


def test_a_prohibition_is_negative_and_a_preference_is_not() -> None:
    never = rule_in("never commit directly to main")
    use = rule_in("we use pnpm here")
    assert never is not None and never.negative and use is not None and not use.negative


def test_remember_prompts_in_any_case() -> None:
    assert remembered("Remember: the API is versioned by header") == "the API is versioned by header"
    assert remembered("please remember: x") == "x" and remembered("I remember it") is None


def test_a_rule_keeps_the_sentence_after_it_the_reason_or_what_to_do_instead() -> None:
    rule = rule_in(
        "don't run the whole e2e suite in the foreground, it takes ages. have a subagent do it and tell me the "
        "result. what do you think?"
    )
    assert rule is not None and rule.negative
    assert rule.quote.endswith("have a subagent do it and tell me the result.")
    assert "what do you think" not in rule.quote


@pytest.mark.parametrize(
    "prompt",
    [
        "no, don't touch it. platform owns that stack and they'll want to look first.",
        "stop doing that!",
        "Don't run it yet",
    ],
)
def test_an_order_about_the_thing_at_hand_is_no_rule(prompt: str) -> None:
    assert rule_in(prompt) is None


def test_a_prohibition_naming_what_it_is_about_is_still_a_rule() -> None:
    assert rule_in("don't touch the generated client, regenerate it from the spec") is not None


def test_a_rule_about_every_instance_of_something_is_a_rule() -> None:
    said = "no, never synchronize. it ate a column once. every schema change is a generated migration, reviewed."
    rule = rule_in(said)
    assert rule is not None and "every schema change is a generated migration" in rule.quote


def test_wants_orders_at_hand_and_private_spans_are_no_rules() -> None:
    assert rule_in("can you check .env.example is in sync? don't want another prod surprise") is None
    assert rule_in("actually stop, don't write anything.") is None
    assert rule_in("now the task: a tax line per row. <private>don't put her name anywhere</private>") is None


def test_a_rule_after_and_we_and_the_rejection_that_opens_it() -> None:
    said = (
        "no floats in lib/ please. this code runs from the timer callback and we keep lib/ integer-only (fixed point)."
    )
    rule = rule_in(said)
    assert rule is not None and "no floats in lib/" in rule.quote and "integer-only" in rule.quote


def test_what_we_do_everywhere_is_a_rule() -> None:
    said = "wait, actually no ^ — we pin the exact compiler version everywhere, it has to match foundry.toml (0.8.24)."
    rule = rule_in(said)
    assert rule is not None and "0.8.24" in rule.quote


def test_no_x_ever_is_a_rule() -> None:
    rule = rule_in("no. csvkit stays zero-npm: no npm: dependencies in this library, ever, only jsr @std.")
    assert rule is not None and "no npm: dependencies in this library, ever" in rule.quote


def test_dont_do_anything_either_is_an_order_at_hand() -> None:
    assert (
        rule_in("actually stop. I don't want a refactor now. don't push anything either, I'll upload manually") is None
    )


def test_no_code_in_backticks_ever_is_a_rule() -> None:
    rule = rule_in("before you go on: no `.unwrap()` in handlers, ever. everything goes through AppError with `?`")
    assert rule is not None and "AppError" in rule.quote


def test_an_abbreviation_does_not_end_the_rules_sentence() -> None:
    rule = rule_in(
        "whoa, no. never run bare `shfmt -w .` here: it uses tabs. We format with the Makefile's flags "
        "(`make fmt FILES=...`, i.e. shfmt -i 2 -ci) and only the files you touched. Revert the others."
    )
    assert rule is not None and "shfmt -i 2 -ci" in rule.quote


def test_only_doing_something_is_a_rule_too() -> None:
    rule = rule_in(
        "ugh, don't run prettier --write on the whole repo. CHANGELOG.md and app.html are formatted by hand. "
        "only format the files your change touched: `npm run format -- <files>`"
    )
    assert rule is not None and "npm run format -- <files>" in rule.quote
    assert rule_in("only two tests failed, the rest passed") is None


def test_what_holds_on_this_machine_or_for_now_is_no_rule() -> None:
    assert rule_in("my ssh agent is broken on this box, use https with this token: abc") is None
    assert rule_in("leave it, we'll revisit the threshold with the team — don't wire codecov either") is None


def test_what_we_always_do_is_a_rule_wherever_it_stands_in_the_sentence() -> None:
    rule = rule_in(
        "no, stop. for anything native we always use `npx expo install`, it resolves the SDK compatible version "
        "itself. never plain npm install / @latest for those."
    )
    assert rule is not None and "npx expo install" in rule.quote and "npm install" in rule.quote


def test_holding_off_until_a_date_is_no_rule() -> None:
    said = "actually no, hold off, we're in the release freeze until the 28th. just tell me roughly, don't run anything"
    assert rule_in(said) is None


def test_a_rule_whose_reason_says_that_file_is_still_a_rule() -> None:
    said = "whoa, no. never put a password in Pulumi.<stack>.yaml in plain text, that file is committed."
    rule = rule_in(said)
    assert rule is not None and rule.negative and "plain text" in rule.quote
    assert rule_in("no, that file. the other one") is None


def test_after_a_rejection_what_things_never_or_always_do_is_a_rule() -> None:
    rule = rule_in(
        "no, components never inject HttpClient directly. Everything goes through the typed IAppointmentsApi."
    )
    assert rule is not None and rule.negative and "IAppointmentsApi" in rule.quote
    said = "no, absolutely not. that bakes the token into the image. secrets never go into the image, only at runtime"
    assert rule_in(said) is not None
    assert rule_in("the tests never pass on my laptop, any idea?") is None  # no rejection: a report
    assert rule_in("no, the cookie never gets set") is None  # a thing, not things: what happens
    assert rule_in("no, the tests never pass on CI") is None  # these tests: what happens


def test_a_rule_after_a_scope_is_quoted_with_the_others() -> None:
    # "in this plugin always use X" states the rule the closing "never Y" only restates
    prompt = (
        "not gmdate either. in this plugin always use wp_date() for anything a user sees, so it's in the site's "
        "timezone and locale. never date()/gmdate() for display"
    )
    rule = rule_in(prompt)
    assert rule is not None and "always use wp_date()" in rule.quote and "never date()" in rule.quote
    assert rule_in("in this repo we never squash merge") is not None
    assert rule_in("in this test it never returns anything") is None
