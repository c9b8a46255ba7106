"""Form-only edits: recognised by their wording, short requests only, renames and translations left alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.core.bounds import CLASSIFY_CHARS
from ctxbus.core.form_edits import MAX_WORDS, FormEdit, recognise_form_edit


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("Fix the typo in the refund confirmation email subject", FormEdit.PROOFREADING),
        ("There are spelling mistakes in docs/onboarding.md, can you fix them?", FormEdit.PROOFREADING),
        ("proofread the release announcement", FormEdit.PROOFREADING),
        ("Correct the grammar in the CONTRIBUTING guide", FormEdit.PROOFREADING),
        ("Rephrase the error toast on the login page so it doesn't blame the user", FormEdit.WORDING),
        ("Reword the intro paragraph of the API guide", FormEdit.WORDING),
        ("Write the copy for the empty inbox screen", FormEdit.WORDING),
        ("Change the label of the submit button from 'Send' to 'Pay now'", FormEdit.WORDING),
        ("Add docstrings to the public functions in fees.py", FormEdit.DOCS_PROSE),
        ("Write a comment above the retry loop explaining the backoff", FormEdit.DOCS_PROSE),
        ("Update the changelog for 2.4.1", FormEdit.DOCS_PROSE),
        ("Add a README section on running the app locally", FormEdit.DOCS_PROSE),
        ("Draft a FAQ entry about chargebacks", FormEdit.DOCS_PROSE),
        ("Write a Markdown page describing the export job's inputs", FormEdit.DOCS_PROSE),
        ("Turn the options paragraph into a Markdown table", FormEdit.FORMATTING),
        ("Make the menu items use title case", FormEdit.FORMATTING),
        ("List the feature flags alphabetically in flags.ts", FormEdit.FORMATTING),
    ],
)
def test_edits_of_form_are_recognised_by_kind(prompt: str, kind: FormEdit) -> None:
    assert recognise_form_edit(prompt) is kind


@pytest.mark.parametrize(
    "prompt",
    [
        # behaviour: fixes, features, reviews, explanations
        "Fix the race in the payout scheduler when two workers pick the same batch",
        "Add an endpoint that returns a merchant's balance per currency",
        "Why does the nightly DAG time out on Mondays?",
        "Review the retry logic in the webhook sender",
        # renames touch imports, schemas and migrations
        "Rename the customer_ref column to external_ref with a migration",
        "Rename TxnList to TransactionList across the codebase",
        # translations go where the project keeps its strings
        "Add German translations for the checkout page",
        # words that only look like a cue
        "Copy the fixtures into the new test module",
        "The title of the page comes from the CMS; where is it fetched?",
        "Sort the results by creation date in the API",
        "",
        "   ",
    ],
)
def test_other_prompts_are_not_edits_of_form(prompt: str) -> None:
    assert recognise_form_edit(prompt) is None


def test_a_long_prompt_that_mentions_a_docstring_is_a_task_with_more_in_it() -> None:
    short = "Add a docstring to settle_batch"
    assert recognise_form_edit(short) is FormEdit.DOCS_PROSE
    long = short + " and then " + " ".join(["change", "the", "settlement", "cut-off", "logic"] * 8)
    assert len(long.split()) > MAX_WORDS
    assert recognise_form_edit(long) is None


@given(st.text(max_size=3 * CLASSIFY_CHARS))
def test_any_text_gets_an_answer(prompt: str) -> None:
    assert recognise_form_edit(prompt) in (None, *FormEdit)


@given(st.sampled_from(["Fix the typos in ", "Reword ", "Add a docstring to "]), st.text(max_size=200))
def test_a_prompt_over_max_words_is_never_an_edit_of_form(cue: str, tail: str) -> None:
    prompt = cue + tail
    if len(prompt.split()) > MAX_WORDS:
        assert recognise_form_edit(prompt) is None
