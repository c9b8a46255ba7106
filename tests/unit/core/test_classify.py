"""The task classifier with hand-made 3-d vectors: cues, combination, general fallback, confidence, cache."""

from __future__ import annotations

import math

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.classify import (
    CUES,
    REASON_BELOW_FLOOR,
    REASON_EMPTY,
    REASON_SMALL_MARGIN,
    REASON_WINNER,
    Classification,
    Classifier,
    ClassifierPolicy,
    SessionClassificationCache,
    TaskClassifier,
    cosine,
    lexical_scores,
    normalise_text,
)

# One axis per type (feature, bugfix, refactor); review/explore/general share a fourth.
AXES = {
    TaskType.FEATURE: [1.0, 0.0, 0.0, 0.0],
    TaskType.BUGFIX: [0.0, 1.0, 0.0, 0.0],
    TaskType.REFACTOR: [0.0, 0.0, 1.0, 0.0],
}
PROTOTYPES = {t: [v] for t, v in AXES.items()}
NEUTRAL = [0.0, 0.0, 0.0, 1.0]  # equally far from every prototype


def unit(*xs: float) -> list[float]:
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


@pytest.fixture
def clf() -> TaskClassifier:
    return TaskClassifier(PROTOTYPES, ClassifierPolicy())


def test_cue_names_are_unique_and_prefixed_by_type() -> None:
    names = [c.name for c in CUES]
    assert len(names) == len(set(names))
    assert all(c.name.startswith(f"{c.task_type.value}:") for c in CUES)
    assert {c.task_type for c in CUES} == set(TaskType)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("There is a bug in the parser", TaskType.BUGFIX),
        ("Refactor the billing module", TaskType.REFACTOR),
        ("Please review my pull request", TaskType.REVIEW),
        ("How does the router work?", TaskType.EXPLORE),
        ("Let users export their data", TaskType.FEATURE),
        ("thanks", TaskType.GENERAL),
    ],
)
def test_lexical_cues_pick_the_type(text: str, expected: TaskType) -> None:
    scores, cues = lexical_scores(text)
    assert max(scores, key=lambda t: scores[t]) is expected
    assert any(c.startswith(expected.value) for c in cues)


def test_lexical_score_saturates_in_unit_interval() -> None:
    scores, _ = lexical_scores("fix the bug: the app crashes with an exception and fails")
    assert 0.9 < scores[TaskType.BUGFIX] < 1.0
    assert scores[TaskType.REVIEW] == 0.0


def test_semantic_alone_decides_without_cues(clf: TaskClassifier) -> None:
    result = clf.classify("the widget", AXES[TaskType.REFACTOR])
    assert result.task_type is TaskType.REFACTOR
    assert result.cues == ()
    assert result.reason == REASON_WINNER


def test_semantic_scores_are_a_distribution(clf: TaskClassifier) -> None:
    scores = clf.semantic_scores(unit(2.0, 1.0, 0.0, 0.0))
    assert math.isclose(sum(scores.values()), 1.0)
    assert scores[TaskType.FEATURE] > scores[TaskType.BUGFIX] > scores[TaskType.REFACTOR]
    assert scores[TaskType.REVIEW] == 0.0  # no prototypes


def test_combination_follows_the_weights() -> None:
    text = "fix the bug"  # lexical says bugfix
    vector = AXES[TaskType.FEATURE]  # semantic says feature
    lexical_heavy = TaskClassifier(PROTOTYPES, ClassifierPolicy(w_lexical=0.9, w_semantic=0.1))
    semantic_heavy = TaskClassifier(PROTOTYPES, ClassifierPolicy(w_lexical=0.1, w_semantic=0.9))
    assert lexical_heavy.classify(text, vector).task_type is TaskType.BUGFIX
    assert semantic_heavy.classify(text, vector).task_type is TaskType.FEATURE
    # scores are the weighted sums
    policy = ClassifierPolicy(w_lexical=1.0, w_semantic=3.0)
    result = TaskClassifier(PROTOTYPES, policy).classify(text, vector)
    lex, _ = lexical_scores(text)
    sem = TaskClassifier(PROTOTYPES, policy).semantic_scores(vector)
    for t in TaskType:
        assert math.isclose(result.scores[t.value], 0.25 * lex[t] + 0.75 * sem[t])


def test_below_floor_falls_back_to_general() -> None:
    policy = ClassifierPolicy(w_lexical=1.0, w_semantic=0.0, min_score=0.5)
    result = TaskClassifier(PROTOTYPES, policy).classify("the new widget", NEUTRAL)  # one weak cue only
    assert result.task_type is TaskType.GENERAL
    assert result.reason == REASON_BELOW_FLOOR
    assert math.isclose(result.confidence, 1.0 - result.scores["feature"])


def test_small_margin_falls_back_to_general() -> None:
    policy = ClassifierPolicy(w_lexical=0.0, w_semantic=1.0, min_margin=0.05)
    between = unit(1.0, 1.0, 0.0, 0.0)  # equally near feature and bugfix
    result = TaskClassifier(PROTOTYPES, policy).classify("the widget", between)
    assert result.task_type is TaskType.GENERAL
    assert result.reason == REASON_SMALL_MARGIN


def test_general_prototypes_compete() -> None:
    protos = {**PROTOTYPES, TaskType.GENERAL: [NEUTRAL]}
    result = TaskClassifier(protos).classify("mm", NEUTRAL)
    assert result.task_type is TaskType.GENERAL
    assert result.reason == REASON_WINNER


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_is_general_with_zero_confidence(clf: TaskClassifier, text: str) -> None:
    result = clf.classify(text, [])
    assert (result.task_type, result.confidence, result.reason) == (TaskType.GENERAL, 0.0, REASON_EMPTY)


@pytest.mark.parametrize(
    ("text", "vector"),
    [
        ("fix the bug crash error failing broken", AXES[TaskType.BUGFIX]),
        ("the widget", NEUTRAL),
        ("refactor", AXES[TaskType.FEATURE]),
        ("hi", unit(1.0, 1.0, 1.0, 0.0)),
    ],
)
def test_confidence_and_scores_in_unit_interval(clf: TaskClassifier, text: str, vector: list[float]) -> None:
    result = clf.classify(text, vector)
    assert 0.0 <= result.confidence <= 1.0
    assert set(result.scores) == {t.value for t in TaskType}
    assert all(0.0 <= s <= 1.0 for s in result.scores.values())


def test_clear_winner_is_more_confident_than_a_close_one(clf: TaskClassifier) -> None:
    clear = clf.classify("fix the crash, it is a bug", AXES[TaskType.BUGFIX])
    close = clf.classify("the widget", unit(1.0, 0.8, 0.0, 0.0))
    assert clear.task_type is TaskType.BUGFIX
    assert clear.confidence > close.confidence


def test_deterministic(clf: TaskClassifier) -> None:
    v = unit(0.3, 0.5, 0.2, 0.1)
    assert clf.classify("split it up", v) == clf.classify("split it up", v)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"w_lexical": -1.0},
        {"w_lexical": 0.0, "w_semantic": 0.0},
        {"w_semantic": math.nan},
        {"semantic_temperature": 0.0},
        {"prototype_top_k": 0},
        {"min_score": 1.5},
        {"min_margin": -0.1},
        {"confident_margin": 0.0},
    ],
)
def test_policy_is_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ClassifierPolicy(**kwargs)  # type: ignore[arg-type]


def test_prototype_dimensions_must_agree() -> None:
    with pytest.raises(ValueError):
        TaskClassifier({TaskType.FEATURE: [[1.0, 0.0]], TaskType.BUGFIX: [[1.0, 0.0, 0.0]]})


def test_cosine() -> None:
    assert math.isclose(cosine([1.0, 0.0], [2.0, 0.0]), 1.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        cosine([1.0], [1.0, 0.0])


class CountingClassifier:
    """A plugged-in classifier (as an LLM one would be) that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def classify(self, text: str, vector: list[float]) -> Classification:
        self.calls += 1
        return Classification(TaskType.REVIEW, 0.9)


def test_cache_hits_by_session_and_normalised_text() -> None:
    plugged = CountingClassifier()
    protocol_check: Classifier = plugged
    embedded: list[str] = []

    def embed(text: str) -> list[float]:
        embedded.append(text)
        return NEUTRAL

    cache = SessionClassificationCache(capacity=4)
    first = cache.classify("s1", "Review  this PR", protocol_check, embed)
    again = cache.classify("s1", "  review this pr ", protocol_check, embed)
    other = cache.classify("s2", "Review this PR", protocol_check, embed)
    assert first == again == other
    assert plugged.calls == 2
    assert embedded == ["Review  this PR", "Review this PR"]
    assert (cache.hits, cache.misses, len(cache)) == (1, 2, 2)
    assert normalise_text("  Review\tthis  PR ") == "review this pr"


def test_cache_evicts_least_recently_used() -> None:
    cache = SessionClassificationCache(capacity=2)
    a, b, c = (Classification(t, 0.5) for t in (TaskType.FEATURE, TaskType.BUGFIX, TaskType.REFACTOR))
    cache.put("s", "a", a)
    cache.put("s", "b", b)
    assert cache.get("s", "a") == a  # a is now the most recent
    cache.put("s", "c", c)  # evicts b
    assert cache.get("s", "b") is None
    assert cache.get("s", "a") == a
    assert cache.get("s", "c") == c
    assert len(cache) == 2


def test_cache_forgets_a_session_and_does_not_embed_empty_text() -> None:
    cache = SessionClassificationCache(capacity=8)
    clf = TaskClassifier(PROTOTYPES)

    def embed(text: str) -> list[float]:
        raise AssertionError("empty text must not be embedded")

    empty = cache.classify("s1", "  ", clf, embed)
    assert empty.reason == REASON_EMPTY
    cache.put("s1", "x", empty)
    cache.put("s2", "x", empty)
    assert cache.forget_session("s1") == 2
    assert len(cache) == 1
    with pytest.raises(ValueError):
        SessionClassificationCache(capacity=0)
