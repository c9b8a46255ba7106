"""Does an agent's message ask for clarification? Phrases and questions, matched in linear time (pure).

A message is cut into words (one regular-expression pass with no nested repetition) and into
sentences; a phrase is a run of words, looked up as word n-grams in a set, so a message of ``n``
words costs ``O(n * MAX_PHRASE_WORDS)`` whatever it holds. Three findings, strongest first:

* a **clarification phrase** anywhere in the message ("unclear", "need more info", "not sure what",
  "could you clarify", "don't know which" ...: :data:`CLARIFICATION_PHRASES`);
* a **question addressed** to the user or the orchestrator: a sentence ending in "?" that speaks to
  someone ("you", "your", "@user", "orchestrator") or deliberates ("should I", "shall we", "do I" ...);
* a **plain question**: the message ends with "?".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

_WORD = re.compile(r"[a-z0-9@]+(?:'[a-z]+)?")
_SENTENCE = re.compile(r"[^.!?\n]*[.!?\n]?")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'"})

#: phrases that say information is missing or unclear (lower case, words separated by one space)
CLARIFICATION_PHRASES: frozenset[str] = frozenset(
    {
        "unclear",
        "ambiguous",
        "unsure",
        "not clear",
        "isn't clear",
        "is not clear",
        "it's not clear",
        "need more info",
        "need more information",
        "need more context",
        "need more details",
        "needs more info",
        "needs more information",
        "need additional information",
        "more information is needed",
        "more info needed",
        "missing information",
        "insufficient information",
        "not enough information",
        "not enough context",
        "no information about",
        "not sure what",
        "not sure how",
        "not sure which",
        "not sure whether",
        "not sure if",
        "not sure where",
        "not sure why",
        "not sure who",
        "don't know which",
        "don't know what",
        "don't know how",
        "don't know whether",
        "don't know if",
        "do not know which",
        "do not know what",
        "do not know how",
        "do not know whether",
        "can't tell",
        "cannot tell",
        "can't determine",
        "cannot determine",
        "unable to determine",
        "please clarify",
        "could you clarify",
        "can you clarify",
        "would you clarify",
        "need clarification",
        "needs clarification",
        "clarification needed",
        "ask for clarification",
        "requesting clarification",
        "please confirm",
        "could you confirm",
        "can you confirm",
        "confused about",
    }
)
_PHRASES = frozenset(tuple(p.split()) for p in CLARIFICATION_PHRASES)
#: the longest phrase, in words
MAX_PHRASE_WORDS = max(len(p) for p in _PHRASES)

#: words that address the question to someone (the user, the orchestrator)
ADDRESS_WORDS: frozenset[str] = frozenset({"you", "your", "you're", "you'd", "@user", "@orchestrator", "orchestrator"})
#: word pairs that deliberate with someone: "should I", "shall we" ...
DELIBERATIONS: frozenset[tuple[str, str]] = frozenset(
    (verb, person) for verb in ("should", "shall", "do", "can", "may", "must") for person in ("i", "we")
)


class Finding(StrEnum):
    PHRASE = "clarification_phrase"
    ADDRESSED_QUESTION = "addressed_question"
    QUESTION = "agent_question"


@dataclass(frozen=True, slots=True)
class Clarification:
    finding: Finding
    #: the phrase found, or the question sentence
    evidence: str


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().translate(_APOSTROPHES))


def find_phrase(tokens: list[str]) -> str | None:
    """The first clarification phrase in ``tokens`` (longest at its position), or None."""
    for start in range(len(tokens)):
        for size in range(min(MAX_PHRASE_WORDS, len(tokens) - start), 0, -1):
            candidate = tuple(tokens[start : start + size])
            if candidate in _PHRASES:
                return " ".join(candidate)
    return None


def _addressed(tokens: list[str]) -> bool:
    return any(t in ADDRESS_WORDS for t in tokens) or any(pair in DELIBERATIONS for pair in pairwise(tokens))


def addressed_question(text: str) -> str | None:
    """The first sentence ending in "?" that is addressed to someone, or None."""
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0)
        if sentence.endswith("?") and _addressed(words(sentence)):
            return " ".join(sentence.split())
    return None


def clarification(text: str) -> Clarification | None:
    """The strongest sign in ``text`` that its author needs clarification, or None."""
    phrase = find_phrase(words(text))
    if phrase is not None:
        return Clarification(Finding.PHRASE, phrase)
    question = addressed_question(text)
    if question is not None:
        return Clarification(Finding.ADDRESSED_QUESTION, question)
    if text.rstrip().endswith("?"):
        return Clarification(Finding.QUESTION, text.strip())
    return None
