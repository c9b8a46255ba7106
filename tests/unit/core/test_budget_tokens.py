"""The token estimate on adversarial input: within the time budget, and the same count as before."""

from __future__ import annotations

import math
import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.core.tokens import NON_ASCII_BLANKS, estimate_tokens

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: assert_within_budget(estimate_tokens, KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_the_estimate_takes_any_text(text: str) -> None:
    with shapes_only():
        assert_within_budget(estimate_tokens, text)


# -- the estimate before it was made faster, kept here as the reference ----------------------------------

_COMBINING = re.compile(r"[\u0300-\u036f]")
_WORD = re.compile(r"[A-Za-z0-9]+")
_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")
_OTHER = re.compile(r"[^\x00-\x7f\s]")
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")


def _old_letters(letters: str, *, dense: bool) -> int:
    if dense or (len(letters) > 1 and not _VOWEL.search(letters)):
        return math.ceil(len(letters) / 2.0)
    return math.ceil(min(len(letters), 10) / 3.5) + math.ceil(max(0, len(letters) - 10) / 2.5)


def _old_word(word: str) -> int:
    if len(word) > 100:
        return 1
    mixed = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    cost = 0
    for hump in _HUMP.findall(word):
        cost += math.ceil(len(hump) / 1.5) if hump.isdigit() else _old_letters(hump, dense=mixed)
    return max(1, min(cost, len(word)))


def old_estimate(text: str) -> int:
    if not text.isascii():
        text = _COMBINING.sub("", unicodedata.normalize("NFD", text))
    words = sum(_old_word(w) for w in _WORD.findall(text))
    return words + len(_PUNCT.findall(text)) + len(_OTHER.findall(text))


WORDISH = st.text(alphabet="aeiouxyzbcdklmnpqrstAEIXYZBKLMQ0123456789", min_size=1, max_size=120)


MARKED = st.text(alphabet="aeé E1-\u0301\u0332\u0368\u0483\u05b0\u3131\uac00 ", max_size=300)


@given(st.one_of(st.text(max_size=200), st.lists(WORDISH, max_size=20).map(" ".join), MARKED))
def test_the_estimate_is_unchanged(text: str) -> None:
    assert estimate_tokens(text) == old_estimate(text)


def test_the_non_ascii_blanks_are_every_non_ascii_blank() -> None:
    assert set(NON_ASCII_BLANKS) == {chr(c) for c in range(0x80, 0x110000) if chr(c).isspace()}
