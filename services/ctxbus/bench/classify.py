"""``ctxbus bench classify``: accuracy of the task classifier on the shipped labelled set.

Loads ``data/task_types.jsonl`` (one ``{"text": ..., "label": ...}`` per line), classifies every
text with the real embedder and the default policy, and reports accuracy, per-type precision and
recall, the confusion matrix (rows: true label, columns: predicted) and the misclassified items.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbus.contract.payloads import TaskType
from ctxbus.core.classify import ClassifierPolicy
from ctxbus.core.task_prototypes import build_classifier
from ctxbus.ports import Embedder

#: The labelled set shipped with the package.
DEFAULT_PATH = Path(__file__).parent / "data" / "task_types.jsonl"
#: Misclassified items shown by the report.
MAX_ERRORS_SHOWN = 20


def load_labelled(path: Path = DEFAULT_PATH) -> list[tuple[str, TaskType]]:
    """(text, label) pairs; a blank line is skipped, a malformed one raises ValueError with its line number."""
    items: list[tuple[str, TaskType]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            items.append((str(record["text"]), TaskType(record["label"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a labelled task: {exc}") from exc
    return items


def evaluate(
    items: Sequence[tuple[str, TaskType]], embedder: Embedder, policy: ClassifierPolicy | None = None
) -> dict[str, Any]:
    """Accuracy, per-type precision/recall/support, confusion matrix and errors for ``items``."""
    classifier = build_classifier(embedder, policy)
    vectors = embedder.embed([text for text, _ in items]) if items else []
    started = time.perf_counter()
    predicted = [classifier.classify(text, vector) for (text, _), vector in zip(items, vectors, strict=True)]
    classify_ms = (time.perf_counter() - started) * 1000
    types = [t.value for t in TaskType]
    confusion = {t: dict.fromkeys(types, 0) for t in types}
    errors: list[dict[str, Any]] = []
    for (text, label), result in zip(items, predicted, strict=True):
        confusion[label.value][result.task_type.value] += 1
        if result.task_type is not label:
            errors.append(
                {"text": text, "label": label.value, "predicted": result.task_type.value, "cues": list(result.cues)}
            )
    per_type: dict[str, dict[str, float]] = {}
    for t in types:
        true_pos = confusion[t][t]
        support = sum(confusion[t].values())
        predicted_as = sum(row[t] for row in confusion.values())
        per_type[t] = {
            "precision": true_pos / predicted_as if predicted_as else 0.0,
            "recall": true_pos / support if support else 0.0,
            "support": float(support),
        }
    correct = sum(confusion[t][t] for t in types)
    return {
        "items": len(items),
        "accuracy": correct / len(items) if items else 0.0,
        "per_type": per_type,
        "confusion": confusion,
        "errors": errors,
        "classify_ms_per_item": classify_ms / len(items) if items else 0.0,
        "model": embedder.model_id,
    }


def run(path: Path | str = DEFAULT_PATH) -> dict[str, Any]:
    """Evaluate the default classifier on the labelled set at ``path`` with the configured real embedder."""
    from ctxbus.components import open_embedder  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415  (the embedder is heavy: load only when run)

    result = evaluate(load_labelled(Path(path)), open_embedder(Settings()))
    result["path"] = str(path)
    return result


def print_report(result: dict[str, Any]) -> None:
    types = [t.value for t in TaskType]
    print(f"ctxbus bench classify: {result['items']} labelled tasks, model {result['model']}")
    ms = result["classify_ms_per_item"]
    print(f"  accuracy {result['accuracy']:.3f}   classify {ms:.3f} ms/item (embedding excluded)")
    print(f"  {'type':10s} {'precision':>9s} {'recall':>7s} {'support':>7s}")
    for t in types:
        r = result["per_type"][t]
        print(f"  {t:10s} {r['precision']:9.3f} {r['recall']:7.3f} {r['support']:7.0f}")
    print("  confusion (rows: label, columns: predicted)")
    print("  " + " " * 10 + "".join(f"{t[:8]:>9s}" for t in types))
    for t in types:
        print(f"  {t:10s}" + "".join(f"{result['confusion'][t][p]:9d}" for p in types))
    errors = result["errors"]
    if errors:
        print(f"  misclassified ({len(errors)}, first {min(len(errors), MAX_ERRORS_SHOWN)}):")
        for e in errors[:MAX_ERRORS_SHOWN]:
            print(f"    {e['label']:>8s} -> {e['predicted']:8s} {e['text'][:90]!r}")
