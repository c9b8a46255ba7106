"""A conservative token estimate for budgets, where the model's tokenizer is not at hand.

The target is all-MiniLM-L6-v2's tokenizer (BERT uncased WordPiece): it strips
accents, splits text on whitespace and on every punctuation character, puts
each CJK ideograph on its own, then cuts each word into vocabulary pieces; a
word of more than 100 characters becomes one ``[UNK]``.

The rule, mirroring that without a vocabulary:

* accents (combining marks after NFD) cost nothing; NFD also splits a Hangul
  syllable into its letters, as the tokenizer does;
* every ASCII punctuation character is one token;
* every other non-ASCII character (CJK, Cyrillic, Greek, emoji, typographic
  punctuation ...) is one token;
* an ASCII run of letters and digits (a word) is cut into humps (camelCase
  parts, digit runs) that cost:

  - a run of digits: one token per 1.5 digits (numbers split into small pieces);
  - letters in a word that also has digits (hex, ids): one token per 2 letters;
  - letters without a vowel (``pkg``, ``cfg``): one token per 2 letters;
  - other letters: one token per 3.5 of the first 10 letters, then one per 2.5
    (long words are rare and split finely);

  a word costs at least one token, at most one per character (a piece is never
  empty), and exactly one beyond 100 characters (``[UNK]``).

Measured against the real tokenizer (``tests/unit/test_tokens.py``): on Python
source, documentation and memory-like prose the estimate is 0-80% over the
real count (median about 25% over) and under it for well under 5% of texts, by
a few percent at most. It under-counts random letter strings (no rule can
without the vocabulary); hex, UUIDs, numbers, non-Latin scripts are covered.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

#: Longest word WordPiece splits; a longer one is a single ``[UNK]`` token.
MAX_WORD_CHARS = 100
#: Digits per token in a run of digits.
DIGITS_PER_TOKEN = 1.5
#: Letters per token where a word mixes letters and digits, or a letter run has no vowel.
DENSE_LETTERS_PER_TOKEN = 2.0
#: Letters per token for the first ``LONG_WORD_CHARS`` letters of an ordinary letter run.
LETTERS_PER_TOKEN = 3.5
#: Letters past this many in one run are costed at ``LONG_LETTERS_PER_TOKEN``.
LONG_WORD_CHARS = 10
#: Letters per token past the first ``LONG_WORD_CHARS``.
LONG_LETTERS_PER_TOKEN = 2.5
#: Distinct words whose cost is remembered.
WORD_CACHE_SIZE = 8192
#: Characters normalised (NFD) at a time (see ``_decomposed``).
NFD_PIECE_CHARS = 64
#: From this many words of letters and digits in one text, their humps are counted in one pass.
MIXED_BATCH_FROM = 64

_COMBINING_MARKS = re.compile(r"[\u0300-\u036f]")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
#: the non-ASCII characters that are blank (``str.isspace``): the other non-ASCII characters are one token each
NON_ASCII_BLANKS = (
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: the letter humps and the digit humps of ``_HUMP``, found apart (digits never start a letter hump)
_LETTER_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_DIGIT_HUMP = re.compile(r"[0-9]+")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")
#: an ASCII word of letters and digits, at most MAX_WORD_CHARS long (possessive: each word is scanned once) ...
_MIXED = rf"(?=[A-Za-z]++[0-9]|[0-9]++[A-Za-z])(?=[A-Za-z0-9]{{1,{MAX_WORD_CHARS}}}+(?![A-Za-z0-9]))"
_MIXED_WORD = re.compile(rf"(?<![A-Za-z0-9]){_MIXED}[A-Za-z0-9]++")
#: ... and every other ASCII word
_OTHER_WORD = re.compile(rf"(?<![A-Za-z0-9])(?!{_MIXED})[A-Za-z0-9]++")


def _letters_cost(letters: str, *, dense: bool) -> int:
    if dense or (len(letters) > 1 and not _VOWEL.search(letters)):
        return math.ceil(len(letters) / DENSE_LETTERS_PER_TOKEN)
    head = math.ceil(min(len(letters), LONG_WORD_CHARS) / LETTERS_PER_TOKEN)
    tail = math.ceil(max(0, len(letters) - LONG_WORD_CHARS) / LONG_LETTERS_PER_TOKEN)
    return head + tail


@lru_cache(maxsize=WORD_CACHE_SIZE)
def word_tokens(word: str) -> int:
    """Estimated WordPiece tokens of one ASCII word (letters and digits only)."""
    if len(word) > MAX_WORD_CHARS:
        return 1
    if word.isdigit():  # one hump of digits
        return math.ceil(len(word) / DIGITS_PER_TOKEN)
    if word.isalpha():
        if word.islower():  # one hump of lower-case letters
            return _letters_cost(word, dense=False)
        mixed = False
    else:  # neither all digits nor all letters: letters and digits
        mixed = True
    cost = 0
    for hump in _HUMP.findall(word):
        if hump.isdigit():
            cost += math.ceil(len(hump) / DIGITS_PER_TOKEN)
        else:
            cost += _letters_cost(hump, dense=mixed)
    return max(1, min(cost, len(word)))


def _mixed_words_tokens(words: list[str]) -> int:
    """:func:`word_tokens` summed over words of letters and digits (at most MAX_WORD_CHARS each), in a few passes.

    In such a word every letter hump costs one token per DENSE_LETTERS_PER_TOKEN letters and every digit hump one
    per DIGITS_PER_TOKEN digits, so its cost depends on its humps' lengths only, and the humps of all the words
    are counted at once (hashes and ids would otherwise cost a call each). Each hump costs at least one token
    and at most one per character, so a word's cost needs no clamping.
    """
    joined = " ".join(words)
    letters = Counter(map(len, _LETTER_HUMP.findall(joined)))
    digits = Counter(map(len, _DIGIT_HUMP.findall(joined)))
    return sum(math.ceil(n / DENSE_LETTERS_PER_TOKEN) * k for n, k in letters.items()) + sum(
        math.ceil(n / DIGITS_PER_TOKEN) * k for n, k in digits.items()
    )


def _words_tokens(text: str) -> int:
    """:func:`word_tokens` summed over the ASCII words of ``text``."""
    mixed = _MIXED_WORD.findall(text)
    if len(mixed) < MIXED_BATCH_FROM:
        return sum(map(word_tokens, _ASCII_WORD.findall(text)))
    return sum(map(word_tokens, _OTHER_WORD.findall(text))) + _mixed_words_tokens(mixed)


def _decomposed(text: str) -> str:
    """NFD, piece by piece (NFD_PIECE_CHARS characters each).

    NFD decomposes each character on its own and then sorts every run of combining marks, in quadratic
    time on a long run (100,000 alternating marks took seconds). Pieces change only the order of marks
    within a run that crosses a piece boundary, and no count here depends on that order: marks are never
    ASCII, so they split words wherever they stand, and the accents dropped are dropped in any order.
    """
    if len(text) <= NFD_PIECE_CHARS:
        return unicodedata.normalize("NFD", text)
    return "".join(
        unicodedata.normalize("NFD", text[at : at + NFD_PIECE_CHARS]) for at in range(0, len(text), NFD_PIECE_CHARS)
    )


def estimate_tokens(text: str) -> int:
    """A conservative estimate of the all-MiniLM-L6-v2 token count of ``text`` (no special tokens)."""
    others = 0
    if not text.isascii():
        text = _decomposed(text)
        if _COMBINING_MARKS.search(text):
            text = _COMBINING_MARKS.sub("", text)
        # non-ASCII and not blank, counted without a list of matches
        others = len(text) - len(text.encode("ascii", "ignore")) - sum(map(text.count, NON_ASCII_BLANKS))
    punctuation = sum(map(text.count, string.punctuation))  # ASCII punctuation, one token each
    return _words_tokens(text) + punctuation + others


class MemoizedCounter:
    """A token counter that remembers the counts of short texts (lines, items, prompts: the same memories are
    counted for request after request), at most ``entries`` of them, the least recently used forgotten first.
    Longer texts are counted each time (an assembled context is rarely counted twice)."""

    def __init__(self, count: Callable[[str], int], *, entries: int = 8_192, max_chars: int = 2_000) -> None:
        self._count = count
        self._max_chars = max_chars
        self._memo = lru_cache(maxsize=entries)(count)

    def __call__(self, text: str) -> int:
        if len(text) > self._max_chars:
            return self._count(text)
        return self._memo(text)
