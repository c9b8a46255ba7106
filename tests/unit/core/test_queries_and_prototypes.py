"""A search's bounds are clear errors; the task classifier's prototypes are embedded in one batch, by type."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxbus.contract.envelope import MAX_PROJECT_CHARS
from ctxbus.contract.payloads import TaskType
from ctxbus.core.queries import MAX_K, MODES, QueryError, check_project, check_query
from ctxbus.core.task_prototypes import PROTOTYPES, build_classifier

#: one axis per task type: a prototype's vector points along its type's axis
AXES = {t: i for i, t in enumerate(TaskType)}


class AxisEmbedder:
    """Embeds a prototype text along its task type's axis (anything else along the general one)."""

    model_id, dim, max_tokens = "axes", len(AXES), 256

    def __init__(self) -> None:
        self.batches: list[int] = []

    def _vector(self, text: str) -> list[float]:
        owner = next((t for t, texts in PROTOTYPES.items() if text in texts), TaskType.GENERAL)
        return [1.0 if i == AXES[owner] else 0.0 for i in range(self.dim)]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.mark.parametrize(
    ("project", "fragment"),
    [("", "empty or blank"), ("  ", "empty or blank"), ("p" * (MAX_PROJECT_CHARS + 1), "at most")],
)
def test_a_bad_project_is_a_clear_error(project: str, fragment: str) -> None:
    with pytest.raises(QueryError, match=fragment):
        check_project(project)


@pytest.mark.parametrize(
    ("query", "k", "mode", "fragment"),
    [
        (" ", 5, "ranked", "empty or blank"),
        ("login", 5, "fuzzy", "unknown search mode 'fuzzy'; valid: ranked, hybrid, dense, sparse"),
        ("login", 0, "dense", f"k must be from 1 to {MAX_K}, not 0"),
        ("login", MAX_K + 1, "sparse", f"not {MAX_K + 1}"),
    ],
)
def test_a_bad_query_is_a_clear_error(query: str, k: int, mode: str, fragment: str) -> None:
    with pytest.raises(QueryError, match=fragment):
        check_query(query, k, mode)


def test_good_queries_pass() -> None:
    check_project("acme/web")
    for mode in MODES:
        check_query("login after reset", 1, mode)
        check_query("login after reset", MAX_K, mode)


def test_the_classifier_embeds_every_prototype_in_one_batch_and_keeps_them_by_type() -> None:
    embedder = AxisEmbedder()
    classifier = build_classifier(embedder)  # type: ignore[arg-type]
    assert embedder.batches == [sum(len(texts) for texts in PROTOTYPES.values())]
    for task_type, texts in PROTOTYPES.items():
        if task_type is TaskType.GENERAL:
            continue
        scores = classifier.semantic_scores(embedder.embed_query(texts[0]))
        assert max(scores, key=lambda t: scores[t]) is task_type, task_type
