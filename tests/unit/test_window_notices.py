"""A prompt longer than the embedding window is embedded truncated, and the completion says so."""

from __future__ import annotations

from collections.abc import Sequence

from ctxbus.retriever.query import window_notices


class WordEmbedder:
    """Counts words as tokens; a 5-token window."""

    model_id = "words"
    dim = 2
    max_tokens = 5

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_only_an_over_window_prompt_gets_a_notice() -> None:
    assert window_notices(WordEmbedder(), "one two three") == ()
    assert window_notices(WordEmbedder(), "a b c d e") == ()  # exactly the window
    (notice,) = window_notices(WordEmbedder(), "one two three four five six seven")
    assert notice.startswith("prompt_truncated: the prompt has 7 tokens; the embedding reads the first 5")
