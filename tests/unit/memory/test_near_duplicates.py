"""The guards that keep near-duplicate merging from folding two different facts into one."""

from __future__ import annotations

from ctxbus.memory.near_copies import near_duplicates, numbers, opposite


def test_numbers_carry_their_units() -> None:
    assert numbers("Retry after 5 minutes, at most 3 times") == {"5 minutes", "3 times"}
    assert numbers("Retry after 5 minutes") != numbers("Retry after 5 seconds")


def test_opposite_sides_and_negations_are_different_facts() -> None:
    assert opposite("Run migrations in a Helm pre-upgrade hook.", "Run migrations in a Helm post-upgrade hook.")
    assert opposite("Use pool size 20 for reads.", "Use pool size 20 for writes.")
    assert opposite("Page on-call for DLQ messages.", "Don't page on-call for DLQ messages.")
    assert not opposite("Never log tokens.", "Tokens must not be logged.")  # both negate: one fact
    assert not opposite("Cache rates with a TTL.", "Rates are cached with an expiry.")


def test_near_duplicates_need_similarity_same_numbers_and_no_contrast() -> None:
    same = ("Set the pool to 20 connections.", "The pool is set to 20 connections.")
    assert near_duplicates(*same, similarity=0.9, threshold=0.75)
    assert not near_duplicates(*same, similarity=0.7, threshold=0.75)
    assert not near_duplicates("Set the pool to 20.", "Set the pool to 40.", similarity=0.99, threshold=0.75)


def test_numbers_in_words_count_and_pronouns_do_not() -> None:
    assert numbers("I ran eighteen miles on Sunday") != numbers("I ran twenty miles on Sunday")
    assert numbers("If an old one shows up again, revoke it") == numbers("Revoke a reused token")
    assert not near_duplicates("Sam ran eleven miles.", "Sam ran twelve miles.", similarity=0.95, threshold=0.75)


def test_contracted_negations_are_negations() -> None:
    assert opposite("He finally climbs the stairs by himself.", "He hasn't figured out the stairs yet.")
    assert opposite("The cache is warm after deploys.", "The cache isn\u2019t warm after deploys.")
    assert not opposite("Don't log tokens.", "Tokens shouldn't be logged.")
