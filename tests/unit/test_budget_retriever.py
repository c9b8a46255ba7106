"""The retriever's reading of a prompt on adversarial input, with the real embedder: what is tokenized and
embedded is a bounded prefix (tokenizing 100,000 characters took up to 350 ms and held the GIL, freezing
every other thread), the notice is computed on it too, and normal prompts embed exactly as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.core.bounds import EMBED_CHARS_PER_TOKEN, QUERY_TERMS_CHARS, prefix
from ctxbus.retriever.query import query_text, window_notices

from .time_budget import (
    KNOWN_WORST,
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
    valid_unicode,
)


def read_prompt(embedder: OnnxMiniLmEmbedder, text: str) -> None:
    request = RetrievalRequested(agent_name="a", prompt=text, trigger=Trigger.USER_PROMPT, mentioned_files=("a.py",))
    window_notices(embedder, query_text(request))


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str, embedder: OnnxMiniLmEmbedder) -> None:
    make = KNOWN_WORST_MAKERS[name]
    assert_scales_linearly(lambda n: assert_within_budget(read_prompt, embedder, valid_unicode(make(n))))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_reading_a_prompt_takes_any_text(embedder: OnnxMiniLmEmbedder, text: str) -> None:
    with shapes_only():
        assert_within_budget(read_prompt, embedder, valid_unicode(text))


class RecordingTokenizer:
    """Passes calls to the real tokenizer, keeping the length of every text it is given."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.lengths: list[int] = []

    def encode(self, text: str, *args: Any, **kwargs: Any) -> Any:
        self.lengths.append(len(text))
        return self._tokenizer.encode(text, *args, **kwargs)

    def encode_batch(self, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        self.lengths.extend(len(t) for t in texts)
        return self._tokenizer.encode_batch(texts, *args, **kwargs)


def test_the_embedder_tokenizes_a_bounded_prefix(embedder: OnnxMiniLmEmbedder) -> None:
    spy = RecordingTokenizer(embedder._tokenizer)
    embedder._tokenizer = spy  # type: ignore[assignment]
    try:
        long = KNOWN_WORST["one-letter words"]
        embedder.embed_query(long)
        embedder.embed([long, "short", long])
        window_notices(embedder, long)
    finally:
        embedder._tokenizer = spy._tokenizer
    assert spy.lengths and max(spy.lengths) <= embedder.max_chars == EMBED_CHARS_PER_TOKEN * embedder.max_tokens
    assert_within_budget(embedder.count_tokens, long[: embedder.max_chars])  # what is tokenized is cheap


def test_a_long_prompt_embeds_as_its_first_window(embedder: OnnxMiniLmEmbedder) -> None:
    text = "Refresh tokens are rotated on every use and revoked after a password reset. " * (SIZE // 76)
    window = EMBED_CHARS_PER_TOKEN * embedder.max_tokens
    assert len(prefix(text, window)) < len(text)
    assert np.allclose(embedder.embed_query(text), embedder.embed_query(text[:3_000]), atol=1e-6)
    assert np.allclose(embedder.embed([text])[0], embedder.embed([text[:3_000]])[0], atol=1e-6)


def test_a_long_prompt_gets_a_notice_that_says_what_was_read(embedder: OnnxMiniLmEmbedder) -> None:
    (notice,) = window_notices(embedder, "word " * (SIZE // 5))
    assert notice.startswith("prompt_truncated: the prompt has more than ")
    assert "the embedding reads the first 256" in notice
    assert f"the keyword search reads the first {QUERY_TERMS_CHARS:,} characters" in notice
    (short,) = window_notices(embedder, "word " * 400)
    assert "has 400 tokens" in short and "the keyword search reads all of it" in short
