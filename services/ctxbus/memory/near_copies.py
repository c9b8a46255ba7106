"""When two memory texts are near copies: one memory restated, not two different facts on one topic.

Used by ingestion to put near copies in one cluster (they stay separate items; only an injected context
collapses a cluster into its best member). Pure: the similarity is computed by the caller.
"""

from __future__ import annotations

import re

#: Cosine at or above which two items of one project and kind are near copies (same cluster). Calibrated on
#: ``bench/data/retrieval/dedupe_pairs.jsonl`` (``ctxbus bench dedupe`` prints the figures).
DEFAULT_NEAR_DUPLICATE = 0.75

_NUMBER = re.compile(r"(\d+(?:[.,]\d+)?)\s*([a-z%]+)?")
_WORD = re.compile(r"[a-z']+")
#: Pairs of opposite words: two texts that take opposite sides of a pair state different facts
#: ("5 minutes" vs "5 seconds" is caught by the numbers with their units).
CONTRASTS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (
        frozenset({"never", "not", "no", "don't", "dont", "avoid", "without", "cannot", "can't", "shouldn't"}),
        frozenset(),
    ),
    (frozenset({"before", "pre", "prior", "earlier"}), frozenset({"after", "post", "later"})),
    (frozenset({"enable", "enabled", "on"}), frozenset({"disable", "disabled", "off"})),
    (
        frozenset({"increase", "raise", "raised", "more", "higher", "larger", "longer"}),
        frozenset({"decrease", "reduce", "reduced", "lower", "less", "fewer", "smaller", "shorter"}),
    ),
    (
        frozenset({"read", "reads", "reader", "replica", "replicas"}),
        frozenset({"write", "writes", "writer", "primary"}),
    ),
    (frozenset({"min", "minimum", "least"}), frozenset({"max", "maximum", "most"})),
    (frozenset({"sync", "synchronous"}), frozenset({"async", "asynchronous"})),
    (frozenset({"client", "frontend", "browser"}), frozenset({"server", "backend"})),
)


#: Words that negate a statement ("don't page" vs "page").
NEGATIONS = frozenset(
    {"not", "never", "don't", "dont", "no", "cannot", "can't", "shouldn't", "mustn't", "avoid", "without"}
)


#: Numbers written as words ("eleven miles" and "eighteen miles" are different facts too); not "one", "once",
#: "first" or "second", which are mostly pronouns and adverbs ("an old one", "first run the tests").
NUMBER_WORDS = frozenset(
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "  # noqa: SIM905
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "third fourth fifth sixth seventh eighth ninth tenth twice".split()
)


def numbers(text: str) -> frozenset[str]:
    """The numbers a text states, with their units (pool sizes, timeouts, versions), and numbers in words."""
    lowered = text.lower()
    digits = {f"{n} {u}" if u else n for n, u in _NUMBER.findall(lowered)}
    return frozenset(digits | (NUMBER_WORDS & set(_WORD.findall(lowered.replace("-", " ")))))


def sides(text: str) -> tuple[int, ...]:
    """The side the text takes of each contrast: -1 (first words only), 1 (second words only), else 0."""
    words = set(_WORD.findall(text.lower().replace("-", " ")))
    return tuple((1 if b & words else 0) - (1 if a & words else 0) for a, b in CONTRASTS)


def negated(text: str) -> bool:
    """Whether the text negates what it says: a negation word, or any "n't" ("hasn't", "isn't", "won't")."""
    words = set(_WORD.findall(text.lower().replace("\u2019", "'")))
    return bool(NEGATIONS & words) or any(w.endswith("n't") for w in words)


def opposite(a: str, b: str) -> bool:
    """Whether the texts take opposite sides of a contrast (before vs after, reads vs writes, ...) or one
    negates what the other says."""
    return negated(a) != negated(b) or any(x * y < 0 for x, y in zip(sides(a), sides(b), strict=True))


def near_duplicates(a: str, b: str, similarity: float, threshold: float) -> bool:
    """Whether two texts are one memory restated: similar enough, stating the same numbers with the same
    units, and not taking opposite sides of a contrast (an embedding barely sees "pre-" vs "post-upgrade")."""
    return similarity >= threshold and numbers(a) == numbers(b) and not opposite(a, b)
