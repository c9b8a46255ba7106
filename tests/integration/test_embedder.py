"""The ONNX MiniLM embedder, loaded from installed packages only."""

from __future__ import annotations

import math

import pytest

from ctxbus.adapters.embedding.onnx_minilm import DIM, OnnxMiniLmEmbedder
from ctxbus.settings import EmbedderSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLmEmbedder:
    return OnnxMiniLmEmbedder(EmbedderSettings(batch_size=4))


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_unit_length_384_dims(embedder: OnnxMiniLmEmbedder) -> None:
    v = embedder.embed_query("Fix login after password reset")
    assert len(v) == DIM == embedder.dim
    assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-5)


def test_paraphrases_are_closer_than_unrelated_text(embedder: OnnxMiniLmEmbedder) -> None:
    a, b, c = embedder.embed(
        ["Fix login after password reset", "Users cannot sign in once they reset their password", "Add CSV export"]
    )
    assert cos(a, b) > 0.5 > cos(a, c) + 0.2


def test_batches_keep_input_order_and_match_single_queries(embedder: OnnxMiniLmEmbedder) -> None:
    texts = [f"text number {i} " + "word " * (i * 7 % 40) for i in range(11)]
    batch = embedder.embed(texts)
    for text, vec in zip(texts, batch, strict=True):
        single = embedder.embed_query(text)
        assert max(abs(x - y) for x, y in zip(vec, single, strict=True)) < 1e-4
    assert embedder.embed([]) == []


def test_token_counting_and_the_window(embedder: OnnxMiniLmEmbedder) -> None:
    assert embedder.count_tokens("hello world") == 2
    long_text = "retrieval " * 1000
    assert embedder.truncates(long_text) and not embedder.truncates("short text")
    assert len(embedder.embed_query(long_text)) == DIM  # cut to the window, not an error
    assert embedder.max_tokens == 256
