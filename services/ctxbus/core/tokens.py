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
import unicodedata
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

_COMBINING_MARKS = re.compile(r"[\u0300-\u036f]")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_ASCII_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")
_OTHER_CHAR = re.compile(r"[^\x00-\x7f\s]")
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")


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
    mixed = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    cost = 0
    for hump in _HUMP.findall(word):
        if hump.isdigit():
            cost += math.ceil(len(hump) / DIGITS_PER_TOKEN)
        else:
            cost += _letters_cost(hump, dense=mixed)
    return max(1, min(cost, len(word)))


def estimate_tokens(text: str) -> int:
    """A conservative estimate of the all-MiniLM-L6-v2 token count of ``text`` (no special tokens)."""
    if not text.isascii():
        text = _COMBINING_MARKS.sub("", unicodedata.normalize("NFD", text))
    words = sum(word_tokens(w) for w in _ASCII_WORD.findall(text))
    return words + len(_ASCII_PUNCT.findall(text)) + len(_OTHER_CHAR.findall(text))
