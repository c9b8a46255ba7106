"""Query embeddings batched and remembered: one model call for a batch's new texts, none for a text asked again
(blanks collapsed), the oldest forgotten beyond the size, the wrapped embedder's answers unchanged."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from ctxbus.adapters.embedding.query_cache import CachedQueryEmbedder, cache_key
from ctxbus.ports import QueryBatcher, Vector


class CountingEmbedder:
    model_id = "fake"
    dim = 2
    max_tokens = 256
    max_chars = 1_000

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        self.calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> Vector:
        return self.embed([text])[0]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_a_batch_is_one_model_call_for_its_new_texts_in_order() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, size=10)
    assert isinstance(cached, QueryBatcher)
    cached.embed_query("fix login")
    vectors = cached.embed_queries(["fix login", "add  pagination", "add pagination", "why flaky"])
    assert inner.calls == [["fix login"], ["add  pagination", "why flaky"]]
    assert vectors == [[9.0, 1.0], [15.0, 1.0], [15.0, 1.0], [9.0, 1.0]]
    assert cached.embed_query("  fix\nlogin ") == [9.0, 1.0]  # same words, same tokens: remembered
    assert len(inner.calls) == 2
    assert cached.hits >= 2


def test_the_cache_is_bounded_and_can_be_off() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, size=2)
    for text in ("a", "b", "c", "a"):
        cached.embed_query(text)
    assert len(cached) == 2 and [c[0] for c in inner.calls] == ["a", "b", "c", "a"]
    off = CachedQueryEmbedder(CountingEmbedder(), size=0)
    off.embed_queries(["a", "a"])
    off.embed_query("a")
    assert len(off) == 0


def test_key_is_what_the_model_reads() -> None:
    assert cache_key("a  b\n c ", 1_000) == "a b c"
    assert cache_key("word " * 100, 20) == cache_key("word " * 200, 20)


def test_everything_else_is_the_wrapped_embedders() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner)
    assert (cached.model_id, cached.dim, cached.max_tokens) == ("fake", 2, 256)
    assert cached.count_tokens("a b c") == 3
    cached.embed(["x", "x"])
    cached.embed(["x"])
    assert inner.calls == [["x", "x"], ["x"]]  # memory items are never cached


class SlowEmbedder(CountingEmbedder):
    """Each model call takes a while, so a second caller arrives while the first is under way."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        time.sleep(self.seconds)
        return super().embed(texts)


def test_a_query_under_way_is_waited_for_not_embedded_twice() -> None:
    inner = SlowEmbedder(0.2)
    cached = CachedQueryEmbedder(inner, size=10)
    first = threading.Thread(target=cached.embed_query, args=("fix the login bug",))
    first.start()
    time.sleep(0.05)  # the first call is inside the model now (the gateway warming a request's vector)
    assert cached.embed_query("fix  the login bug") == [17.0, 1.0]  # the retriever: same key, waits for it
    first.join()
    assert inner.calls == [["fix the login bug"]]
    assert cached.embed_queries(["fix the login bug", "other"]) == [[17.0, 1.0], [5.0, 1.0]]
    assert inner.calls == [["fix the login bug"], ["other"]]


def test_a_batch_waits_for_its_texts_under_way_and_embeds_the_rest() -> None:
    inner = SlowEmbedder(0.2)
    cached = CachedQueryEmbedder(inner, size=10)
    first = threading.Thread(target=cached.embed_query, args=("warm one",))
    first.start()
    time.sleep(0.05)
    assert cached.embed_queries(["warm one", "cold"]) == [[8.0, 1.0], [4.0, 1.0]]
    first.join()
    assert inner.calls == [["warm one"], ["cold"]]


def test_a_failed_call_under_way_leaves_the_waiter_to_embed_itself() -> None:
    class Failing(CountingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.fail = True

        def embed(self, texts: Sequence[str]) -> list[Vector]:
            time.sleep(0.1)
            if self.fail:
                self.fail = False
                raise RuntimeError("model down")
            return super().embed(texts)

    inner = Failing()
    cached = CachedQueryEmbedder(inner, size=10)
    errors: list[BaseException] = []

    def warm() -> None:
        try:
            cached.embed_query("q")
        except RuntimeError as exc:
            errors.append(exc)

    first = threading.Thread(target=warm)
    first.start()
    time.sleep(0.03)
    assert cached.embed_query("q") == [1.0, 1.0]  # the first call failed: this one embedded it
    first.join()
    assert len(errors) == 1 and inner.calls == [["q"]]


def test_with_the_cache_off_a_query_under_way_is_still_shared() -> None:
    inner = SlowEmbedder(0.2)
    cached = CachedQueryEmbedder(inner, size=0)  # nothing remembered: the call under way hands its vector over
    first = threading.Thread(target=cached.embed_query, args=("shared",))
    first.start()
    time.sleep(0.05)
    assert cached.embed_query("shared") == [6.0, 1.0]
    first.join()
    assert inner.calls == [["shared"]] and len(cached) == 0
