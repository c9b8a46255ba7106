"""Task classification on adversarial input: the cues read a bounded prefix (some cues backtrack, which
on 100,000 characters took 14 s), the session cache keys stay small, and normal text is read as before."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbus.contract.payloads import TaskType
from ctxbus.core.bounds import CLASSIFY_CHARS
from ctxbus.core.classify import CUES, SessionClassificationCache, TaskClassifier, lexical_scores, normalise_text

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)

DIMS = 16
_rng = random.Random(7)
PROTOTYPES = {t: [[_rng.uniform(-1, 1) for _ in range(DIMS)] for _ in range(4)] for t in TaskType}
VECTOR = [_rng.uniform(-1, 1) for _ in range(DIMS)]


@pytest.fixture(scope="module")
def classifier() -> TaskClassifier:
    return TaskClassifier(PROTOTYPES)


def classify_cached(cache: SessionClassificationCache, classifier: TaskClassifier, text: str) -> None:
    found = cache.get("s", text)
    if found is None:
        cache.put("s", text, classifier.classify(text, VECTOR))


def check(classifier: TaskClassifier, text: str) -> None:
    assert_within_budget(lexical_scores, text)
    assert_within_budget(classifier.classify, text, VECTOR)
    assert_within_budget(classify_cached, SessionClassificationCache(), classifier, text)
    assert_within_budget(normalise_text, text)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str, classifier: TaskClassifier) -> None:
    assert_scales_linearly(lambda n: check(classifier, KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_classification_takes_any_text(text: str) -> None:
    with shapes_only():
        check(TaskClassifier(PROTOTYPES), text)


def test_cues_read_a_bounded_prefix() -> None:
    filler = "lorem ipsum " * (CLASSIFY_CHARS // 12 + 10)
    assert lexical_scores(filler + " there is a bug")[1] == ()
    assert lexical_scores("there is a bug " + filler)[1] == ("bugfix:bug-word",)


def test_long_texts_that_differ_only_at_the_end_are_cached_apart(classifier: TaskClassifier) -> None:
    cache = SessionClassificationCache()
    long = "word " * (CLASSIFY_CHARS * 3)
    cache.put("s", long + "one", classifier.classify(long + "one", VECTOR))
    assert cache.get("s", long + "two") is None
    assert cache.get("s", long + "one") is not None
    assert cache.get("s", "  " + long.upper() + "ONE ") is not None  # still case- and blank-insensitive


@given(st.text(max_size=CLASSIFY_CHARS))
def test_normal_text_is_read_whole(text: str) -> None:
    expected = {cue.name for cue in CUES if cue.pattern.search(text)}
    assert set(lexical_scores(text)[1]) == expected
