"""Keyword vectors on adversarial input: the query side reads a bounded prefix, the document side a bound
above the largest memory item, both within the time budget; normal text is read as before."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.core.bounds import MAX_QUERY_TERMS, QUERY_TERMS_CHARS
from ctxbus.core.lexical import DOCUMENT_TERMS_CHARS, document_vector, query_vector, term_index, terms
from ctxbus.memory.model import MAX_CONTENT_CHARS

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)


def check(text: str) -> None:
    assert_within_budget(query_vector, text)
    assert_within_budget(document_vector, text)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_vectors_take_any_text(text: str) -> None:
    with shapes_only():
        check(text)


def test_the_query_reads_a_bounded_prefix() -> None:
    head = "kafka rebalance " * 10
    text = head + "filler " * (QUERY_TERMS_CHARS // 7) + "zookeeper"
    found = set(query_vector(text).indices)
    assert term_index("kafka") in found and term_index("zookeeper") not in found


def test_the_query_keeps_at_most_the_term_limit_first_seen_first() -> None:
    consonants = "bcdfghjkmnpqrtvwxz"  # no vowel, no s or y: plain words that no stemming touches
    words = ["zq" + "".join(consonants[n // 18**k % 18] for k in range(3)) for n in range(2 * MAX_QUERY_TERMS)]
    vec = query_vector(" ".join(words))
    assert len(vec.indices) == MAX_QUERY_TERMS
    assert set(vec.indices) == {term_index(w) for w in words[:MAX_QUERY_TERMS]}


def test_the_document_bound_is_above_any_memory_item() -> None:
    # title (500) + content + key insight, lesson and mitigation (2,000 each) + separators
    assert DOCUMENT_TERMS_CHARS > 500 + MAX_CONTENT_CHARS + 3 * 2_000 + 10


@given(st.text(max_size=300))
def test_normal_text_is_read_whole(text: str) -> None:
    assert set(query_vector(text).indices) == {term_index(t) for t in terms(text)}
