"""The embedder screen (``ctxbus bench retrieval --separation``): AUC, the best single cut and the per-prompt
scores, with a word-count embedder standing in for a model (pure logic; the real model runs in the bench)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxbus.bench.separation import Scored, auc, best_threshold, run, score_store, summary
from ctxbus.bench.store_data import Prompt, StorePlan
from ctxbus.memory.model import MemoryItem, MemoryKind

WORDS = ("cents", "money", "price", "session", "password", "reset", "deploy", "weather", "lunch")


class WordEmbedder:
    """A unit vector of word counts over :data:`WORDS` (the Embedder port's shape)."""

    model_id = "words"
    dim = len(WORDS) + 1
    max_tokens = 64

    def _vector(self, text: str) -> list[float]:
        words = text.lower().replace(".", " ").split()
        counts = [float(words.count(w)) for w in WORDS] + [0.01]
        norm = math.sqrt(sum(c * c for c in counts))
        return [c / norm for c in counts]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _item(slug: str, text: str) -> MemoryItem:
    return MemoryItem(id=f"team#{slug}", project="team", kind=MemoryKind.CONVENTION, title=slug, content=text)


def _scored(best: float, *, on: bool, rank: int = 1, category: str = "near_miss") -> Scored:
    return Scored("p", "s", "fit", "on_topic" if on else category, best, rank if on else 0)


def test_auc_counts_pairs_and_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5], [0.5]) == 0.5
    assert auc([0.6, 0.3], [0.4, 0.2]) == 0.75
    assert math.isnan(auc([], [0.1]))


def test_the_best_cut_separates_when_the_data_allow_it() -> None:
    clean = [_scored(0.6, on=True), _scored(0.7, on=True), _scored(0.3, on=False), _scored(0.4, on=False)]
    cut = best_threshold(clean)
    assert 0.4 < cut["threshold"] <= 0.6
    assert (cut["false_rejection"], cut["false_injection"]) == (0.0, 0.0)


def test_the_best_cut_cannot_beat_overlap_and_counts_ranking_misses() -> None:
    # the on-topic prompt at 0.2 sits below both nulls: any cut loses it or lets a null through
    mixed = [_scored(0.6, on=True), _scored(0.2, on=True), _scored(0.3, on=False), _scored(0.1, on=False)]
    cut = best_threshold(mixed)
    assert max(cut["false_rejection"], cut["false_injection"]) == 0.5
    # an on-topic prompt whose item is not in the top k is rejected whatever the cut
    missed = [_scored(0.9, on=True, rank=11), _scored(0.8, on=True), _scored(0.1, on=False)]
    assert best_threshold(missed, k=10)["false_rejection"] == 0.5


def test_score_store_ranks_by_cosine_and_marks_nulls() -> None:
    plan = StorePlan(
        "team@own",
        "team",
        5,
        "team",
        (
            _item("money", "Money is stored as integer cents."),
            _item("reset", "Password reset must end every session."),
            _item("deploy", "Deploy on Tuesdays."),
        ),
        (
            Prompt("on-1", "the price in cents is off", "fit", {"team#money": 3}),
            Prompt("on-2", "a deploy after a password reset", "fit", {"team#reset": 3}),
            Prompt("null-1", "what is the weather for lunch", "fit", {}, "smalltalk"),
        ),
    )
    latencies: list[float] = []
    scored = {s.prompt_id: s for s in score_store(plan, WordEmbedder(), latencies)}
    assert len(latencies) == 3
    assert (scored["on-1"].rank, scored["on-1"].category) == (1, "on_topic")
    assert scored["on-2"].rank in (1, 2)  # "deploy" and "reset" tie-break by cosine
    assert (scored["null-1"].rank, scored["null-1"].category) == (0, "smalltalk")
    assert scored["null-1"].best < 0.1 < scored["on-1"].best
    figures = summary(list(scored.values()))
    assert (figures["on_topic"], figures["null"], figures["auc"]) == (2, 1, 1.0)


def test_run_reads_the_team_stores(tmp_path: Path) -> None:
    team = tmp_path / "fit"
    team.mkdir()
    (team / "acme-web.md").write_text(
        "# Acme conventions\n\n## Money is integer cents\nPrices are cents, never floats.\n\n"
        "## Password reset ends every session\nAfter a password reset, revoke each session.\n",
        encoding="utf-8",
    )
    (team / "prompts.jsonl").write_text(
        '{"id": "a-on-1", "store": "acme-web", "query": "show the price in cents", '
        '"relevant": ["acme-web#money-is-integer-cents"], "kind": "on_topic"}\n'
        '{"id": "a-null-1", "store": "acme-web", "query": "weather at lunch", "category": "smalltalk", '
        '"kind": "null"}\n',
        encoding="utf-8",
    )
    result = run(WordEmbedder(), stores_dir=tmp_path, log=lambda _m: None)
    assert result["stores"] == 1
    fit = result["sets"]["fit"]
    assert (fit["on_topic"], fit["null"], fit["top1"], fit["auc"]) == (1, 1, 1.0, 1.0)
    assert result["sets"]["held_out"]["on_topic"] == 0
    assert result["query_ms"]["median"] >= 0.0


@pytest.mark.parametrize("values", [[0.1, 0.2, 0.3]])
def test_summary_quantiles_are_ordered(values: list[float]) -> None:
    scored = [_scored(v, on=True) for v in values] + [_scored(v - 0.05, on=False) for v in values]
    got = summary(scored)
    assert got["on_topic_best"] == sorted(got["on_topic_best"])
    assert got["auc"] > 0.5
