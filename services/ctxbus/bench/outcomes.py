"""``ctxbus bench outcomes``: accuracy of outcome inference on the shipped labelled transcripts.

Loads ``data/outcomes/labels.jsonl`` (one ``{"file", "outcome", "category", "set", "why"}`` per line),
reads each transcript with the same pure code the hook gateway runs
(:func:`ctxbus.core.transcript.evidence_in`, then :func:`ctxbus.core.outcome_rules.decide`), and
reports accuracy overall and per outcome, per-outcome precision, the confusion matrix (rows: label,
columns: inferred), accuracy per set (A: the rules were tuned on it; B: written after, held out from
the tuning), accuracy per category, which rules decided, and every mistake.

Each transcript is judged as one window of evidence, as the gateway would if it saw the whole
transcript at once: a prompt that follows an assistant turn is read as feedback on it (the gateway
reads that prompt at UserPromptSubmit instead). How the set was written: ``data/outcomes/README.md``.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ctxbus.contract.payloads import Outcome
from ctxbus.core.outcome_rules import Decision, decide
from ctxbus.core.transcript import evidence_in, parse_lines

#: The labelled set shipped with the package.
DEFAULT_DIR = Path(__file__).parent / "data" / "outcomes"
OUTCOMES = [o.value for o in Outcome]


def load_labels(directory: Path = DEFAULT_DIR) -> list[dict[str, str]]:
    """The labels; a malformed line, an unknown outcome or a missing transcript raises ValueError."""
    path = directory / "labels.jsonl"
    labels: list[dict[str, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            label = {k: str(record[k]) for k in ("file", "outcome")} | {
                k: str(record.get(k, "")) for k in ("category", "set", "why")
            }
            Outcome(label["outcome"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a labelled transcript: {exc}") from exc
        if not (directory / label["file"]).is_file():
            raise ValueError(f"{path}:{number}: no transcript {label['file']}")
        labels.append(label)
    return labels


def infer(transcript: Path) -> Decision:
    """The outcome ctxbus infers from one whole transcript."""
    with transcript.open(encoding="utf-8") as fh:
        entries = parse_lines(fh)
    return decide(evidence_in(entries, prompts_as_feedback=True))


def evaluate(directory: Path = DEFAULT_DIR) -> dict[str, Any]:
    labels = load_labels(directory)
    confusion = {t: dict.fromkeys(OUTCOMES, 0) for t in OUTCOMES}
    by_category: dict[str, list[int]] = {}
    by_set: dict[str, list[int]] = {}
    deciding: Counter[str] = Counter()
    errors: list[dict[str, Any]] = []
    started = time.perf_counter()
    for label in labels:
        decision = infer(directory / label["file"])
        predicted = decision.outcome.value
        confusion[label["outcome"]][predicted] += 1
        for tally in (by_category.setdefault(label["category"], [0, 0]), by_set.setdefault(label["set"], [0, 0])):
            tally[0] += predicted == label["outcome"]
            tally[1] += 1
        deciding[decision.rules[0]] += 1
        if predicted != label["outcome"]:
            errors.append(
                {
                    "file": label["file"],
                    "set": label["set"],
                    "label": label["outcome"],
                    "predicted": predicted,
                    "rules": list(decision.rules),
                    "why": label["why"],
                }
            )
    elapsed_ms = (time.perf_counter() - started) * 1000
    per_outcome: dict[str, dict[str, float]] = {}
    for o in OUTCOMES:
        support = sum(confusion[o].values())
        predicted_as = sum(row[o] for row in confusion.values())
        per_outcome[o] = {
            "accuracy": confusion[o][o] / support if support else 0.0,
            "precision": confusion[o][o] / predicted_as if predicted_as else 0.0,
            "support": float(support),
        }
    correct = sum(confusion[o][o] for o in OUTCOMES)
    return {
        "transcripts": len(labels),
        "accuracy": correct / len(labels) if labels else 0.0,
        "per_outcome": per_outcome,
        "confusion": confusion,
        "per_set": {c: {"accuracy": ok / n, "n": float(n)} for c, (ok, n) in sorted(by_set.items())},
        "per_category": {c: {"accuracy": ok / n, "n": float(n)} for c, (ok, n) in sorted(by_category.items())},
        "deciding_rules": dict(deciding.most_common()),
        "errors": errors,
        "ms_per_transcript": elapsed_ms / len(labels) if labels else 0.0,
        "path": str(directory),
    }


def run(directory: Path | str = DEFAULT_DIR) -> dict[str, Any]:
    return evaluate(Path(directory))


def print_report(result: dict[str, Any]) -> None:
    print(f"ctxbus bench outcomes: {result['transcripts']} labelled transcripts ({result['path']})")
    print(f"  accuracy {result['accuracy']:.3f}   {result['ms_per_transcript']:.2f} ms per transcript")
    print(f"  {'outcome':11s} {'accuracy':>8s} {'precision':>9s} {'support':>7s}")
    for o in OUTCOMES:
        r = result["per_outcome"][o]
        print(f"  {o:11s} {r['accuracy']:8.3f} {r['precision']:9.3f} {r['support']:7.0f}")
    print("  confusion (rows: label, columns: inferred)")
    print("  " + " " * 11 + "".join(f"{o:>11s}" for o in OUTCOMES))
    for o in OUTCOMES:
        print(f"  {o:11s}" + "".join(f"{result['confusion'][o][p]:11d}" for p in OUTCOMES))
    print("  per set: " + ", ".join(f"{c} {r['accuracy']:.3f} ({r['n']:.0f})" for c, r in result["per_set"].items()))
    print(
        "  per category: "
        + ", ".join(f"{c} {r['accuracy']:.2f} ({r['n']:.0f})" for c, r in result["per_category"].items())
    )
    print("  deciding rules: " + ", ".join(f"{rule} {n}" for rule, n in result["deciding_rules"].items()))
    errors = result["errors"]
    if errors:
        print(f"  wrong ({len(errors)}):")
        for e in errors:
            print(f"    {e['label']:>10s} -> {e['predicted']:10s} {e['set']} {e['file']}  [{', '.join(e['rules'])}]")
