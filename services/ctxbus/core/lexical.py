"""Lexical (BM25-style) sparse vectors: the keyword half of hybrid search.

Pure functions, the same on every vector-store adapter. A text becomes terms; a term becomes a
sparse-vector index (a stable 31-bit hash, so no vocabulary has to be stored or shared); a
document's value per term is BM25's saturated term frequency; a query's value per term is 1. The
store multiplies by the term's IDF (Qdrant's ``Modifier.IDF`` on the sparse vector), so the dot
product of a query and a document vector is the document's BM25 score for the query.

Terms: lower-cased words and numbers; identifiers are kept whole *and* split into their parts
(``TokenService`` -> ``tokenservice``, ``token``, ``service``; ``max_poll_records`` ->
``max_poll_records``, ``max``, ``poll``, ``records``), so an exact config key and a plain-words
query both match. English stop words are dropped; alphabetic words get a light suffix stemmer
(``retries``/``retrying``/``retried`` -> ``retri``) that never touches identifiers.

Bounded reading (``ctxbus.core.bounds``): a query's terms come from its first QUERY_TERMS_CHARS characters,
at most MAX_QUERY_TERMS distinct ones (first seen first); a document's from its first DOCUMENT_TERMS_CHARS,
more than the largest memory item holds, so every stored item is read whole.

BM25 needs the average document length; it is the constant :data:`AVG_DOC_TERMS` (memory items
are short notes of similar length), so a document's vector never changes when others are added.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from ctxbus.core.bounds import MAX_QUERY_TERMS, QUERY_TERMS_CHARS, prefix

#: BM25's term-frequency saturation and length normalisation.
K1 = 1.2
B = 0.75
#: The assumed average document length in terms (typical memory items: 20-60 terms).
AVG_DOC_TERMS = 40.0
#: Longest term kept (longer tokens are hashes, base64, minified code: noise for keyword search).
MAX_TERM_CHARS = 64
#: Characters of a document read for terms: above the largest item text (title, content, insight, lesson,
#: mitigation), so no stored item is cut, while any text's cost stays bounded.
DOCUMENT_TERMS_CHARS = 32_000
#: Sparse indices are 31-bit hashes (Qdrant takes u32).
INDEX_MASK = 0x7FFF_FFFF

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]*[A-Za-z0-9]|[A-Za-z0-9]")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "via",
        "per",
        "let",
        "lets",
        "get",
        "got",
        "use",
        "used",
        "using",
        "make",
        "made",
        "need",
        "needs",
        "want",
    ]
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "edly", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    """A light, deterministic suffix stemmer for plain alphabetic words (identifiers are left alone)."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            root = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                return root + "i"
            if suffix == "s" and root.endswith(("s", "u", "i")):  # "class", "status", "analysis"
                return word
            return root
    return word


def terms(text: str) -> list[str]:
    """The lexical terms of ``text``, in order, with repeats (see the module doc)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if len(token) > MAX_TERM_CHARS:
            continue
        lowered = token.lower()
        parts = _PART.findall(token)
        if len(parts) > 1:  # an identifier, path or dotted name: keep it whole and its parts
            out.append(lowered)
            out.extend(stem(p.lower()) for p in parts if p.lower() not in STOP_WORDS and len(p) > 1)
        elif lowered not in STOP_WORDS:
            out.append(stem(lowered))
    return out


def term_index(term: str) -> int:
    """The sparse-vector index of a term: stable across processes and machines."""
    return zlib.crc32(term.encode("utf-8")) & INDEX_MASK


@dataclass(frozen=True, slots=True)
class SparseVector:
    """Sorted unique indices and their values."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __bool__(self) -> bool:
        return bool(self.indices)


def _vector(weights: dict[int, float]) -> SparseVector:
    ordered = sorted(weights.items())
    return SparseVector(tuple(i for i, _ in ordered), tuple(round(v, 6) for _, v in ordered))


def _by_index(counts: Counter[str]) -> dict[int, float]:
    merged: dict[int, float] = {}
    for term, tf in counts.items():  # a (very rare) hash collision adds the two terms' frequencies
        index = term_index(term)
        merged[index] = merged.get(index, 0.0) + tf
    return merged


def document_vector(text: str) -> SparseVector:
    """A document's BM25 term weights (the store's IDF modifier supplies the IDF)."""
    found = terms(prefix(text, DOCUMENT_TERMS_CHARS))
    if not found:
        return SparseVector((), ())
    norm = K1 * (1.0 - B + B * len(found) / AVG_DOC_TERMS)
    return _vector({i: tf * (K1 + 1.0) / (tf + norm) for i, tf in _by_index(Counter(found)).items()})


def query_vector(text: str) -> SparseVector:
    """A query's terms, each weighted 1 (repeats do not count twice); see the module doc for its bounds."""
    return _query_vector(prefix(text, QUERY_TERMS_CHARS))


@lru_cache(maxsize=1024)  # a request's text is read several times (its search mode, each search); keys are bounded
def _query_vector(text: str) -> SparseVector:
    distinct = list(dict.fromkeys(terms(text)))[:MAX_QUERY_TERMS]
    return _vector(dict.fromkeys(_by_index(Counter(distinct)), 1.0))
