"""Query embeddings, batched and remembered.

- :meth:`CachedQueryEmbedder.embed_queries` embeds a batch of queries with as few model calls as it can (the
  texts not cached yet, sorted by length, in chunks of the embedder's batch size): the retriever embeds every
  request of a fetch this way before it searches and ranks each.
- A bounded LRU cache of query vectors keyed by the text as the model reads it (cut to the window, blanks
  collapsed: the tokenizer splits on whitespace, so the tokens, and the vector, are the same): a prompt asked
  again (a retry, a sub-agent, a re-sent hook) is not embedded again.
- A query under way is not embedded twice: a caller that asks for a text another thread is embedding waits for
  that result (the gateway starts a hook's query while its request crosses the bus, and the retriever then finds
  the vector done or nearly done). A call under way that fails leaves its waiters to embed the text themselves.

Everything else (memory items, token counts) goes to the wrapped embedder untouched. Thread-safe.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

from ctxbus.core.bounds import prefix
from ctxbus.core.lru import Lru
from ctxbus.ports import Embedder, Vector

#: query vectors kept (384 floats each: about 3.5 MB of Python floats per 1,000)
DEFAULT_SIZE = 2_048
#: the longest a caller waits for another thread's embedding of the same text before embedding it itself
WAIT_S = 5.0


def cache_key(text: str, max_chars: int) -> str:
    """What the model reads of a query, blanks collapsed (same key, same tokens)."""
    return " ".join(prefix(text, max_chars).split())


class _Call:
    """One model call under way: set ``done`` once it ended; ``vectors`` holds what it embedded (by key)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.vectors: dict[str, Vector] = {}


class CachedQueryEmbedder:
    """The ``Embedder`` port around another one, with batched and remembered query embeddings."""

    def __init__(self, inner: Embedder, *, size: int = DEFAULT_SIZE, max_chars: int | None = None) -> None:
        self._inner = inner
        self._max_chars = max_chars if max_chars is not None else getattr(inner, "max_chars", 1 << 30)
        self._vectors = Lru[str, Vector](max(0, size))
        #: texts being embedded now, and the call that embeds each
        self._under_way: dict[str, _Call] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    @property
    def max_tokens(self) -> int:
        return self._inner.max_tokens

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self._inner.embed(texts)

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)

    def _get(self, key: str) -> Vector | None:
        vector = self._vectors.get(key)
        if vector is None:
            self.misses += 1
        else:
            self.hits += 1
        return vector

    def embed_query(self, text: str) -> Vector:
        """The query's vector (the cached one when the same text was embedded lately or is being embedded now by
        another thread). Do not modify it."""
        key = cache_key(text, self._max_chars)
        vector = self._get(key)
        if vector is not None:
            return vector
        vector = self._awaited(key)
        if vector is not None:
            return vector
        with self._embedding(key) as call:
            vector = call.vectors[key] = self._inner.embed_query(text)
            self._vectors.put(key, vector)
        return vector

    def _awaited(self, key: str) -> Vector | None:
        """The vector of ``key`` once another thread's call under way has it (None: none under way, or it failed)."""
        with self._lock:
            call = self._under_way.get(key)
        if call is None or not call.done.wait(WAIT_S):
            return None
        return call.vectors.get(key)

    @contextlib.contextmanager
    def _embedding(self, *keys: str) -> Iterator[_Call]:
        """Marks ``keys`` as being embedded by this thread for the body, which puts their vectors in the call; the
        waiters are released at its end (with the vectors, or none when the call failed)."""
        call = _Call()
        with self._lock:
            for key in keys:
                self._under_way.setdefault(key, call)
        try:
            yield call
        finally:
            with self._lock:
                for key in keys:
                    if self._under_way.get(key) is call:
                        del self._under_way[key]
            call.done.set()

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Every text's vector, in order: the ones not cached embedded together (one model call per chunk of
        similar lengths), and remembered."""
        keys = [cache_key(t, self._max_chars) for t in texts]
        found: dict[str, Vector] = {}
        missing: dict[str, str] = {}  # key -> a text with that key
        for key, text in zip(keys, texts, strict=True):
            if key in found or key in missing:
                continue
            vector = self._get(key)
            if vector is None:
                missing[key] = text
            else:
                found[key] = vector
        with self._lock:
            elsewhere = [key for key in missing if key in self._under_way]
        for key in elsewhere:  # another thread is embedding it: take its vector (or embed it below if that failed)
            vector = self._awaited(key)
            if vector is not None:
                found[key] = vector
                del missing[key]
        if missing:
            with self._embedding(*missing) as call:
                for key, vector in zip(missing, self._inner.embed(list(missing.values())), strict=True):
                    found[key] = call.vectors[key] = vector
                    self._vectors.put(key, vector)
        return [found[key] for key in keys]

    def __len__(self) -> int:
        return len(self._vectors)
