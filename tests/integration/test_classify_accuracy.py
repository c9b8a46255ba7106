"""The shipped labelled task set and the classifier's accuracy on it with the real embedder."""

from __future__ import annotations

from collections import Counter

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.bench.classify import DEFAULT_PATH, evaluate, load_labelled
from ctxbus.contract.payloads import TaskType
from ctxbus.core.classify import SessionClassificationCache
from ctxbus.core.task_prototypes import PROTOTYPES, build_classifier

pytestmark = pytest.mark.integration

MIN_ITEMS = 150
MIN_PER_TYPE = 25
MIN_ACCURACY = 0.85


def test_labelled_set_loads_and_covers_every_type() -> None:
    items = load_labelled(DEFAULT_PATH)
    assert len(items) >= MIN_ITEMS
    counts = Counter(label for _, label in items)
    assert set(counts) == set(TaskType)
    assert min(counts.values()) >= MIN_PER_TYPE
    assert len({text for text, _ in items}) == len(items)  # no duplicates


def test_accuracy_floor(embedder: OnnxMiniLmEmbedder) -> None:
    result = evaluate(load_labelled(DEFAULT_PATH), embedder)
    assert result["accuracy"] >= MIN_ACCURACY, result["errors"]


def test_prototypes_are_not_in_the_labelled_set() -> None:
    texts = {text.casefold() for text, _ in load_labelled(DEFAULT_PATH)}
    assert not any(p.casefold() in texts for ps in PROTOTYPES.values() for p in ps)


def test_session_cache_with_the_real_embedder(embedder: OnnxMiniLmEmbedder) -> None:
    classifier = build_classifier(embedder)
    cache = SessionClassificationCache(capacity=16)
    first = cache.classify("s", "The checkout page crashes with a TypeError", classifier, embedder.embed_query)
    second = cache.classify("s", "the checkout page crashes with a typeerror", classifier, embedder.embed_query)
    assert first.task_type is TaskType.BUGFIX
    assert second is first
    assert cache.hits == 1
