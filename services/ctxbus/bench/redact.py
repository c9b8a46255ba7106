"""``ctxbus bench redact``: what redaction costs per call, and how often it touches text that holds no secret.

Per call (CPU time of this thread, the best and the median of the runs): a 2 KB prompt (the shipped labelled task
texts run together), a 100 KB transcript chunk (the shipped labelled transcripts) and 100 KB of ctxbus's own code,
plus the slowest of the adversarial texts of ``ctxbus bench adversarial --functions`` at 100 KB (the worst case).
False positives: the share of the shipped bench data's texts and of ctxbus's own modules that redaction changes
(none holds a secret, so every change is a false positive); the redaction tests print the same figure with the docs.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ctxbus.bench.text_budget import KNOWN_WORST_MAKERS

DATA = Path(__file__).parent / "data"
PACKAGE = Path(__file__).parents[1]
PROMPT_CHARS = 2_000
CHUNK_CHARS = 100_000


def _cpu_per_call(fn: Callable[[str], object], text: str, runs: int) -> tuple[float, float]:
    """(best, median) thread CPU seconds of ``fn(text)`` over ``runs`` calls (the first, warming, not counted)."""
    fn(text)
    times = []
    gc.disable()
    try:
        for _ in range(runs):
            started = time.thread_time()
            fn(text)
            times.append(time.thread_time() - started)
    finally:
        gc.enable()
    return min(times), statistics.median(times)


def _strings(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and len(item) > 20:
            yield item


def sample_texts() -> dict[str, str]:
    tasks = [json.loads(line)["text"] for line in (DATA / "task_types.jsonl").read_text().splitlines() if line]
    transcripts = "".join(p.read_text(encoding="utf-8") for p in sorted((DATA / "outcomes").glob("*.jsonl")))
    code = "".join(p.read_text(encoding="utf-8") for p in sorted((PACKAGE / "core").glob("*.py")))
    return {
        "prompt_2kb": " ".join(tasks)[:PROMPT_CHARS],
        "transcript_100kb": (transcripts * (CHUNK_CHARS // max(1, len(transcripts)) + 1))[:CHUNK_CHARS],
        "code_100kb": (code * (CHUNK_CHARS // max(1, len(code)) + 1))[:CHUNK_CHARS],
    }


def ordinary_texts() -> list[str]:
    """Texts that hold no secret: the shipped bench data's strings and ctxbus's own modules (not the rules)."""
    texts: list[str] = []
    for path in sorted(DATA.rglob("*.jsonl")):
        if "capture" in path.parts:  # the capture corpus plants secrets on purpose (its bench counts them)
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.extend(_strings(json.loads(line)))
    # the redactor's own sources (its rules hold secret shapes) and this benchmark
    sources = (p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "redact")
    texts += [p.read_text(encoding="utf-8") for p in sources if p.name != "redact.py"]
    return texts


def run(runs: int = 30) -> dict[str, Any]:
    from ctxbus.redact.default import default_redactor  # noqa: PLC0415

    default_redactor.cache_clear()
    started = time.perf_counter()
    redactor = default_redactor()  # compiling the rules (importing detect-secrets is the process's, once)
    build_s = time.perf_counter() - started
    result: dict[str, Any] = {"build_s": round(build_s, 3), "per_call_ms": {}}
    for name, text in sample_texts().items():
        best, median = _cpu_per_call(redactor.redact, text, runs if len(text) < 10_000 else max(3, runs // 5))
        result["per_call_ms"][name] = {
            "chars": len(text),
            "best": round(best * 1000, 3),
            "median": round(median * 1000, 3),
            "ms_per_mb": round(median * 1000 / len(text) * 1_000_000, 1),
        }
    worst = ("", 0.0)
    for name, make in KNOWN_WORST_MAKERS.items():
        best, _ = _cpu_per_call(redactor.redact, make(CHUNK_CHARS), 3)
        worst = max(worst, (name, best), key=lambda w: w[1])
    result["adversarial_worst_100kb"] = {"text": worst[0], "ms": round(worst[1] * 1000, 2)}
    texts = ordinary_texts()
    changed = sum(1 for t in texts if redactor.run(t).found)
    result["false_positives"] = {
        "texts": len(texts),
        "changed": changed,
        "rate": round(changed / len(texts), 5) if texts else 0.0,
        "mb": round(sum(len(t) for t in texts) / 1e6, 2),
    }
    return result


def print_report(result: dict[str, Any]) -> None:
    print(f"redaction (detect-secrets + ctxbus rules), built in {result['build_s']} s")
    print(f"{'text':<18} {'chars':>8} {'best ms':>9} {'median ms':>10} {'ms/MB':>8}")
    for name, row in result["per_call_ms"].items():
        print(f"{name:<18} {row['chars']:>8} {row['best']:>9} {row['median']:>10} {row['ms_per_mb']:>8}")
    worst = result["adversarial_worst_100kb"]
    print(f"slowest adversarial text at 100,000 chars: {worst['text']} {worst['ms']} ms")
    fp = result["false_positives"]
    print(
        f"false positives: {fp['changed']} of {fp['texts']} texts holding no secret ({fp['rate']:.3%}, {fp['mb']} MB)"
    )
