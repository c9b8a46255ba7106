"""``ctxbus bench dedupe``: how well the near-copy clustering threshold separates labelled pairs.

Ingestion keeps near copies as separate items in one cluster, and an injected context shows only the best of a
cluster (:mod:`ctxbus.core.collapse`); only exact duplicates (same normalised text) merge, whatever the threshold.
So a pair of different facts called near copies (a *false link*) costs one of them its place in contexts where
both rank (it stays searchable); a pair of real copies missed costs a context a repeated memory.

``bench/data/retrieval/dedupe_pairs.jsonl`` holds pairs of memory texts labelled duplicate (the same fact restated)
or not (same topic, different fact; or unrelated). Each pair is embedded like ingestion embeds items; the report
gives precision, recall and F1 of "near copies" (cosine >= t, the same numbers with their units, no opposite
sides) for a range of thresholds, the best one, and the figures of the default (``DEFAULT_NEAR_DUPLICATE``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbus.bench.retrieval import DATA_DIR

THRESHOLDS = tuple(round(0.70 + 0.01 * n, 2) for n in range(29))


def load_pairs(path: Path) -> list[tuple[str, str, bool]]:
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw = json.loads(line)
        if (
            not isinstance(raw.get("a"), str)
            or not isinstance(raw.get("b"), str)
            or not isinstance(raw.get("duplicate"), bool)
        ):
            raise ValueError(f"{path}:{number}: needs string a, string b and boolean duplicate")
        pairs.append((raw["a"], raw["b"], raw["duplicate"]))
    return pairs


def confusion(
    similarities: Sequence[float], labels: Sequence[bool], threshold: float, same_numbers: Sequence[bool] | None = None
) -> dict[str, float]:
    """Precision, recall and F1 of calling a pair near copies when its cosine is at least ``threshold`` (and, as
    ingestion does, both texts state the same numbers and take no opposite sides: ``same_numbers``)."""
    same = same_numbers or [True] * len(labels)
    called = [s >= threshold and n for s, n in zip(similarities, same, strict=True)]
    tp = sum(1 for c, d in zip(called, labels, strict=True) if c and d)
    fp = sum(1 for c, d in zip(called, labels, strict=True) if c and not d)
    fn = sum(1 for c, d in zip(called, labels, strict=True) if not c and d)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "threshold": threshold,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "false_links": fp,
    }


def run(path: Path = DATA_DIR / "dedupe_pairs.jsonl") -> dict[str, Any]:
    from ctxbus.components import open_embedder  # noqa: PLC0415
    from ctxbus.memory.near_copies import DEFAULT_NEAR_DUPLICATE, numbers, opposite  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    pairs = load_pairs(path)
    embedder = open_embedder(Settings())
    vectors = embedder.embed([t for a, b, _ in pairs for t in (a, b)])
    sims = [sum(x * y for x, y in zip(vectors[2 * n], vectors[2 * n + 1], strict=True)) for n in range(len(pairs))]
    labels = [d for _, _, d in pairs]
    same = [numbers(a) == numbers(b) and not opposite(a, b) for a, b, _ in pairs]
    table = [confusion(sims, labels, t, same) for t in THRESHOLDS]
    best = max(table, key=lambda row: (row["f1"], row["precision"]))
    dup = sorted(s for s, d in zip(sims, labels, strict=True) if d)
    other = sorted(s for s, d in zip(sims, labels, strict=True) if not d)
    return {
        "pairs": len(pairs),
        "duplicates": len(dup),
        "cosine_duplicates": {"min": round(dup[0], 4), "median": round(dup[len(dup) // 2], 4)} if dup else {},
        "cosine_others": {"median": round(other[len(other) // 2], 4), "max": round(other[-1], 4)} if other else {},
        "table": table,
        "best": best,
        "default": confusion(sims, labels, DEFAULT_NEAR_DUPLICATE, same),
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"near-copy clustering: {result['pairs']} labelled pairs ({result['duplicates']} duplicates)")
    print(f"  cosine of duplicates: {result['cosine_duplicates']}; of the others: {result['cosine_others']}")
    print(f"  {'threshold':>9} {'precision':>9} {'recall':>7} {'F1':>6} {'false links':>11}")
    for row in result["table"]:
        print(
            f"  {row['threshold']:>9.2f} {row['precision']:>9.3f} {row['recall']:>7.3f} {row['f1']:>6.3f} "
            f"{row['false_links']:>11}"
        )
    best, default = result["best"], result["default"]
    print(
        f"  best F1 at {best['threshold']:.2f}; the default {default['threshold']:.2f}: precision "
        f"{default['precision']:.3f}, recall {default['recall']:.3f}, F1 {default['f1']:.3f}"
    )
