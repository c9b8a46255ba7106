"""``ctxbus bench retrieval``: retrieval quality on a labelled set, and retrieval speed at scale.

Quality: the memories and graded queries of ``bench/data/retrieval/`` (written for this project:
see its README) go into a fresh embedded store; every query is answered three ways (dense only,
sparse/BM25 only, and the full ranking: hybrid search + task classification + profile policy +
ranking, i.e. the retriever's own code through :class:`ctxbus.api.Memory`) and scored with
recall@5, recall@10, MRR and nDCG@10, overall and by query category. It also checks what a
demanding user would: no item of another project ever comes back, and an item a query marks
*cautionary* (a failed approach) is, when the full ranking returns it, shown as a warning. Then, per
task type, the full ranking with the task-type profiles against without them, and domain detection
(:mod:`ctxbus.bench.retrieval_tasks`).

Speed: the store is then filled with synthetic memories up to ``--scale`` items (default
10,000) and each query is retrieved again through the full path (embed + search + rank), timed.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbus.bench.ir_metrics import ndcg_at, recall_at, reciprocal_rank
from ctxbus.bench.stats import percentile

DATA_DIR = Path(__file__).resolve().parent / "data" / "retrieval"
METHODS = ("dense", "sparse", "hybrid", "full")
#: the API's mode for each method
MODE = {"dense": "dense", "sparse": "sparse", "hybrid": "hybrid", "full": "ranked"}
K = 10


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    id: str
    project: str
    query: str
    domain: str | None
    category: str
    relevant: dict[str, int]
    cautionary: tuple[str, ...]
    #: the task type written into the set (see its README); None: not labelled
    task_type: str | None = None


def load_queries(path: Path) -> list[LabelledQuery]:
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw = json.loads(line)
        try:
            queries.append(
                LabelledQuery(
                    id=str(raw["id"]),
                    project=str(raw["project"]),
                    query=str(raw["query"]),
                    domain=raw.get("domain") or None,
                    category=str(raw.get("category") or "uncategorised"),
                    relevant={str(k): int(v) for k, v in raw["relevant"].items()},
                    cautionary=tuple(str(c) for c in raw.get("cautionary") or ()),
                    task_type=raw.get("task_type") or None,
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}:{number}: not a labelled query: {exc!r}") from exc
    return queries


def load_memories(path: Path) -> list[Any]:
    from ctxbus.memory.jsonl_file import parse_jsonl  # noqa: PLC0415

    parsed = parse_jsonl(path, project="__unlabelled__")
    if parsed.errors:
        raise ValueError(f"{path}: {len(parsed.errors)} bad lines, first: {parsed.errors[0]}")
    return list(parsed.items)


def _scores(ranked: Sequence[str], query: LabelledQuery) -> dict[str, float]:
    return {
        "recall@5": recall_at(ranked, query.relevant, 5),
        "recall@10": recall_at(ranked, query.relevant, 10),
        "mrr": reciprocal_rank(ranked, query.relevant),
        "ndcg@10": ndcg_at(ranked, query.relevant, 10),
    }


def _mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.fmean(r[key] for r in rows), 4) for key in rows[0]} if rows else {}


def evaluate(memory: Any, queries: Sequence[LabelledQuery]) -> dict[str, Any]:
    """Quality of each method over ``queries`` (``memory``: an open :class:`ctxbus.api.Memory`)."""
    from ctxbus.core.sections import WARNINGS, section_of  # noqa: PLC0415

    per_method: dict[str, list[dict[str, float]]] = defaultdict(list)
    per_category: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    leaks: dict[str, int] = defaultdict(int)
    cautionary_seen = cautionary_as_warning = 0
    for query in queries:
        for method in METHODS:
            # the single methods see the query text only; the full ranking also gets the task's domain, as a
            # ranking signal (a domain given to dense/sparse/hybrid search would be a hard filter instead)
            domain = query.domain if method == "full" else None
            result = memory.search(query.project, query.query, k=K, mode=MODE[method], domain=domain)
            ranked = [f.id for f in result.items]
            leaks[method] += sum(1 for f in result.items if f.project not in (query.project, "__global__"))
            scores = _scores(ranked, query)
            per_method[method].append(scores)
            per_category[(method, query.category)].append(scores)
            if method == "full":
                for found in result.items:
                    if found.id in query.cautionary:
                        cautionary_seen += 1
                        stored = memory.store.get(found.project, [found.id])
                        if stored and section_of(stored[0]) == WARNINGS:
                            cautionary_as_warning += 1
    categories = sorted({c for _, c in per_category})
    return {
        "queries": len(queries),
        "methods": {m: _mean(per_method[m]) for m in METHODS},
        "by_category": {c: {m: _mean(per_category[(m, c)]) for m in METHODS} for c in categories},
        "cross_project_leaks": dict(leaks),
        "cautionary_returned": cautionary_seen,
        "cautionary_shown_as_warning": cautionary_as_warning,
    }


def measure_speed(memory: Any, queries: Sequence[LabelledQuery], rounds: int) -> dict[str, float]:
    """Full-path retrieval times in ms (embed + search + rank), after one warm-up pass."""
    for query in queries[:5]:
        memory.search(query.project, query.query, k=K, domain=query.domain)
    times: list[float] = []
    for _ in range(rounds):
        for query in queries:
            times.append(memory.search(query.project, query.query, k=K, domain=query.domain).ms)
    return {
        "retrievals": len(times),
        "p50_ms": round(percentile(times, 50), 2),
        "p99_ms": round(percentile(times, 99), 2),
        "max_ms": round(max(times), 2),
    }


def fill(memory: Any, total: int, log: Callable[[str], None]) -> int:
    """Synthetic memories in the labelled projects until the store holds ``total`` items."""
    from ctxbus.bench.corpus import memories  # noqa: PLC0415
    from ctxbus.memory.ingest import ingest  # noqa: PLC0415

    missing = total - memory.store.count()
    if missing <= 0:
        return 0
    projects = ("payments-api", "web-dashboard", "data-pipeline", "__global__")
    share = -(-missing // len(projects))
    added = 0
    for n, project in enumerate(projects):
        items = memories(min(share, missing - added), project, seed=11 + n)
        for start in range(0, len(items), 256):
            ingest(items[start : start + 256], memory.embedder, memory.store, near_duplicate=None)
            added += len(items[start : start + 256])
            log(f"  filler: {memory.store.count()} / {total} memories")
    return added


def run(
    *, scale: int = 10_000, rounds: int = 2, data_dir: Path = DATA_DIR, log: Callable[[str], None] = print
) -> dict[str, Any]:
    from ctxbus.api import Memory  # noqa: PLC0415
    from ctxbus.memory.ingest import ingest  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    memories = load_memories(data_dir / "memories.jsonl")
    queries = load_queries(data_dir / "queries.jsonl")
    with tempfile.TemporaryDirectory(prefix="ctxbus-bench-retrieval-") as tmp:
        settings = Settings(data_dir=Path(tmp))
        with Memory.open(settings) as memory:
            started = time.perf_counter()
            # the labelled set is stored as written: its near-duplicate hard negatives must stay separate
            ingest(memories, memory.embedder, memory.store, near_duplicate=None)
            log(f"stored {len(memories)} labelled memories in {time.perf_counter() - started:.1f} s")
            quality = evaluate(memory, queries)
            tasks = _task_profile_figures(memory, queries)
            speed_small = measure_speed(memory, queries, 1)
            started = time.perf_counter()
            fill(memory, scale, log=lambda m: None)
            log(f"filled to {memory.store.count()} memories in {time.perf_counter() - started:.1f} s")
            speed = measure_speed(memory, queries, rounds)
            scale_quality = evaluate(memory, queries)
            total = memory.store.count()
    return {
        "memories": len(memories),
        "quality": quality,
        **tasks,
        "quality_at_scale": {"memories": total, "methods": scale_quality["methods"]},
        "speed_labelled_set": speed_small,
        "speed": {"memories": total, **speed},
    }


def _task_profile_figures(memory: Any, queries: Sequence[LabelledQuery]) -> dict[str, Any]:
    """The task-type profiles on against off, and domain detection (:mod:`ctxbus.bench.retrieval_tasks`)."""
    from ctxbus.api import Memory  # noqa: PLC0415
    from ctxbus.bench import retrieval_tasks  # noqa: PLC0415

    off = memory.settings.injection.model_copy(update={"task_profiles": False})
    plain = Memory(
        memory.settings.model_copy(update={"injection": off}), memory.embedder, memory.store, owns_store=False
    )
    with plain:
        compared = retrieval_tasks.compare(memory, plain, queries)
    return {"task_profiles": compared, "domain_detection": retrieval_tasks.detect_domains(memory, queries)}


def print_report(result: dict[str, Any]) -> None:
    quality = result["quality"]
    print(f"retrieval quality: {quality['queries']} graded queries over {result['memories']} memories (k={K})")
    header = f"  {'method':<8} {'recall@5':>9} {'recall@10':>10} {'MRR':>7} {'nDCG@10':>8}"
    print(header)
    for method, m in quality["methods"].items():
        print(f"  {method:<8} {m['recall@5']:>9.3f} {m['recall@10']:>10.3f} {m['mrr']:>7.3f} {m['ndcg@10']:>8.3f}")
    print("  nDCG@10 by category:   " + "  ".join(f"{m:>7}" for m in METHODS))
    for category, methods in quality["by_category"].items():
        print(f"    {category:<20} " + "  ".join(f"{methods[m]['ndcg@10']:>7.3f}" for m in METHODS))
    print(f"  cross-project leaks: {quality['cross_project_leaks']}")
    print(
        f"  cautionary items returned by the full ranking: {quality['cautionary_returned']}, "
        f"shown as warnings: {quality['cautionary_shown_as_warning']}"
    )
    if "task_profiles" in result:
        from ctxbus.bench import retrieval_tasks  # noqa: PLC0415

        retrieval_tasks.print_report(result)
    scaled = result["quality_at_scale"]
    print(
        f"  with {scaled['memories']} memories (synthetic filler added): nDCG@10 "
        + ", ".join(f"{m} {v['ndcg@10']:.3f}" for m, v in scaled["methods"].items())
    )
    for label, key in (("labelled set", "speed_labelled_set"), (f"{result['speed']['memories']} memories", "speed")):
        s = result[key]
        print(
            f"retrieval speed ({label}, embed + search + rank, {s['retrievals']} retrievals): "
            f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms"
        )
    print("target at 10,000 memories: p50 <= 15 ms, p99 <= 40 ms")
