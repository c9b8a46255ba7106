"""Lexical vectors: terms, stable indices, BM25 document weights, unit query weights."""

from __future__ import annotations

import pytest

from ctxbus.core.lexical import AVG_DOC_TERMS, K1, B, document_vector, query_vector, stem, term_index, terms


def test_identifiers_are_kept_whole_and_split_into_parts() -> None:
    found = terms("Set max_poll_records in TokenService.refresh()")
    assert "max_poll_records" in found and {"max", "poll", "record"} <= set(found)
    assert "tokenservice.refresh" in found and {"token", "service", "refresh"} <= set(found)


def test_stop_words_go_and_plain_words_are_stemmed_alike() -> None:
    assert terms("the of and to") == []
    assert stem("retries") == stem("retried") == "retri"
    assert stem("connections") == stem("connection") == "connection"
    assert stem("status") == "status" and stem("class") == "class"  # no mangled endings
    assert stem("jwt") == "jwt"  # short words untouched


def test_indices_are_stable_31_bit_hashes() -> None:
    assert term_index("kafka") == term_index("kafka")
    assert term_index("kafka") != term_index("kafkas")
    assert 0 <= term_index("anything at all") < 2**31


def test_document_weights_are_bm25_term_frequency_saturation() -> None:
    text = "cache cache invalidation"
    vec = document_vector(text)
    weights = dict(zip(vec.indices, vec.values, strict=True))
    norm = K1 * (1 - B + B * 3 / AVG_DOC_TERMS)
    assert weights[term_index("cache")] == pytest.approx(2 * (K1 + 1) / (2 + norm), abs=1e-6)
    assert weights[term_index("invalid")] == pytest.approx(1 * (K1 + 1) / (1 + norm), abs=1e-6)
    assert list(vec.indices) == sorted(vec.indices)


def test_query_weights_are_one_per_distinct_term_and_empty_text_is_empty() -> None:
    vec = query_vector("cache the cache")
    assert vec.values == (1.0,)
    assert not query_vector("   ") and not document_vector("")
