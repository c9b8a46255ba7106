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

Held out: ``queries_heldout.jsonl`` (graded queries written after the ranking, the profiles and the floor were
fixed) is scored the same way, apart (``quality.held_out``, ``task_profiles_held_out``): the recall the floor costs
and the profiles' effect, judged on queries nothing was tuned on.

Abstention: the full ranking runs again on the injection path (``full+floor``: the relevance floor and
meta-prompt recognition of :mod:`ctxbus.core.abstain` and :mod:`ctxbus.core.meta_prompts`), and so do the
null prompts of ``null_queries.jsonl`` (nothing in the store is relevant to them). Reported: the false
injection rate (null prompts that got any item) and the precision of the returned items on the graded
queries (share graded relevant), with and without the floor. The floor's defaults were calibrated on
these prompts, so these figures are in sample; ``--calibrate`` (:mod:`ctxbus.bench.abstain_calibration`)
prints the procedure and its cross-validated figures.

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
from typing import Any, TypeVar

from ctxbus.bench.intervals import bootstrap_mean, clopper_pearson
from ctxbus.bench.ir_metrics import ndcg_at, recall_at, reciprocal_rank
from ctxbus.bench.retrieval_tasks import HELD_OUT_ALL
from ctxbus.bench.stats import percentile

DATA_DIR = Path(__file__).resolve().parent / "data" / "retrieval"
METHODS = ("dense", "sparse", "hybrid", "full", "full+floor")
#: the API's mode for each method
MODE = {"dense": "dense", "sparse": "sparse", "hybrid": "hybrid", "full": "ranked", "full+floor": "ranked"}
K = 10
_Row = TypeVar("_Row")


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


@dataclass(frozen=True, slots=True)
class NullPrompt:
    """A prompt nothing in the store is relevant to: a topic no memory covers, or a meta prompt."""

    id: str
    project: str
    query: str
    category: str

    @property
    def meta(self) -> bool:
        return self.category == "meta"


#: Null prompt sets written after the relevance floor was fixed: judged, never fitted (``--calibrate`` does not
#: read them).
HELD_OUT_NULL_SETS = ("null_queries_heldout.jsonl", "null_queries_heldout2.jsonl", "null_queries_heldout3.jsonl")
#: Graded query sets written after the ranking, the task-type profiles and the floor were fixed (the same rule):
#: the first drew its topics from memories ``queries.jsonl`` hardly uses, the second and third as ``queries.jsonl``
#: did (the third with more reviews and explorations), the fourth with many small wording and documentation tasks.
HELD_OUT_QUERY_SETS = (
    "queries_heldout.jsonl",
    "queries_heldout2.jsonl",
    "queries_heldout3.jsonl",
    "queries_heldout4.jsonl",
)


def load_nulls(path: Path) -> list[NullPrompt]:
    if not path.exists():
        return []
    nulls = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            nulls.append(NullPrompt(str(raw["id"]), str(raw["project"]), str(raw["query"]), str(raw["category"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{number}: not a null prompt: {exc!r}") from exc
    return nulls


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


def _precision(returned: Sequence[tuple[int, int]]) -> float | None:
    """Share of returned items graded relevant, over (returned, relevant among them) per query."""
    total = sum(n for n, _ in returned)
    return round(sum(r for _, r in returned) / total, 4) if total else None


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def evaluate_nulls(memory: Any, nulls: Sequence[NullPrompt]) -> dict[str, Any]:
    """How many null prompts get any item, without and with the floor (all, topic or meta, by category)."""
    got: dict[tuple[str, bool], int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    for null in nulls:
        groups = ("all", "meta") if null.meta else ("all", "topic", f"topic: {null.category}")
        for group in groups:
            seen[group] += 1
        for floor in (False, True):
            if memory.search(null.project, null.query, k=K, abstain=floor).items:
                for group in groups:
                    got[(group, floor)] += 1
    return {
        "null_prompts": seen["all"],
        "counts": dict(seen),
        "false_injection_rate": {
            group: {
                "without_floor": _rate(got[(group, False)], n),
                "with_floor": _rate(got[(group, True)], n),
                "with_floor_ci95": [round(end, 4) for end in clopper_pearson(got[(group, True)], n)],
            }
            for group, n in sorted(seen.items())
        },
    }


def _floor_cost(per_method: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """What the floor costs the graded queries: recall@10 with it minus without it, in points, with the paired
    bootstrap 95% interval of that mean (a query turned away loses its recall; the floor drops nothing else)."""
    pairs = zip(per_method["full+floor"], per_method["full"], strict=True)
    deltas = [(floored["recall@10"] - full["recall@10"]) * 100 for floored, full in pairs]
    if not deltas:
        return {}
    low, high = bootstrap_mean(deltas)
    return {"points": round(statistics.fmean(deltas), 2), "ci95": [round(low, 2), round(high, 2)]}


def evaluate(memory: Any, queries: Sequence[LabelledQuery], nulls: Sequence[NullPrompt] = ()) -> dict[str, Any]:
    """Quality of each method over ``queries`` (``memory``: an open :class:`ctxbus.api.Memory`), and the
    abstention figures over ``nulls``."""
    from ctxbus.core.sections import WARNINGS, section_of  # noqa: PLC0415

    per_method: dict[str, list[dict[str, float]]] = defaultdict(list)
    per_category: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    returned: dict[str, list[tuple[int, int]]] = defaultdict(list)
    leaks: dict[str, int] = defaultdict(int)
    cautionary_seen = cautionary_as_warning = 0
    abstained = 0
    for query in queries:
        for method in METHODS:
            # the single methods see the query text only; the full ranking also gets the task's domain, as a
            # ranking signal (a domain given to dense/sparse/hybrid search would be a hard filter instead)
            full = method.startswith("full")
            domain = query.domain if full else None
            result = memory.search(
                query.project, query.query, k=K, mode=MODE[method], domain=domain, abstain=method == "full+floor"
            )
            ranked = [f.id for f in result.items]
            leaks[method] += sum(1 for f in result.items if f.project not in (query.project, "__global__"))
            scores = _scores(ranked, query)
            per_method[method].append(scores)
            per_category[(method, query.category)].append(scores)
            if full:
                returned[method].append((len(ranked), sum(1 for i in ranked if i in query.relevant)))
            if method == "full+floor" and not ranked:
                abstained += 1
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
        "abstention": {
            "graded_abstained": abstained,
            "recall_cost": _floor_cost(per_method),
            "precision": {
                "without_floor": _precision(returned["full"]),
                "with_floor": _precision(returned["full+floor"]),
            },
            **(evaluate_nulls(memory, nulls) if nulls else {}),
        },
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
    nulls = load_nulls(data_dir / "null_queries.jsonl")
    held_out = {name: load_nulls(data_dir / name) for name in HELD_OUT_NULL_SETS if (data_dir / name).exists()}
    held_out_sets = {name: load_queries(data_dir / name) for name in HELD_OUT_QUERY_SETS if (data_dir / name).exists()}
    with tempfile.TemporaryDirectory(prefix="ctxbus-bench-retrieval-") as tmp:
        settings = Settings(data_dir=Path(tmp))
        with Memory.open(settings) as memory:
            started = time.perf_counter()
            # the labelled set is stored as written: its near-duplicate hard negatives must stay separate
            ingest(memories, memory.embedder, memory.store, near_duplicate=None)
            log(f"stored {len(memories)} labelled memories in {time.perf_counter() - started:.1f} s")
            quality = evaluate(memory, queries, nulls)
            if held_out:
                quality["abstention_held_out"] = _held_out_nulls(memory, held_out)
            tasks = _task_profile_figures(memory, queries)
            if held_out_sets:
                quality["held_out"], tasks["task_profiles_held_out"] = _held_out_figures(memory, held_out_sets)
            speed_small = measure_speed(memory, queries, 1)
            started = time.perf_counter()
            fill(memory, scale, log=lambda m: None)
            log(f"filled to {memory.store.count()} memories in {time.perf_counter() - started:.1f} s")
            speed = measure_speed(memory, queries, rounds)
            scale_quality = evaluate(memory, queries, nulls)
            total = memory.store.count()
    return {
        "memories": len(memories),
        "quality": quality,
        **tasks,
        "quality_at_scale": {
            "memories": total,
            "methods": scale_quality["methods"],
            "abstention": scale_quality["abstention"],
        },
        "speed_labelled_set": speed_small,
        "speed": {"memories": total, **speed},
    }


def _with_all(sets: dict[str, list[_Row]]) -> dict[str, list[_Row]]:
    """The held-out sets, and (with more than one) all of them together under ``HELD_OUT_ALL``."""
    return {**sets, HELD_OUT_ALL: [x for rows in sets.values() for x in rows]} if len(sets) > 1 else sets


def _held_out_nulls(memory: Any, sets: dict[str, list[NullPrompt]]) -> dict[str, Any]:
    """Each held-out set of null prompts, and (with more than one set) all of them together."""
    return {name: evaluate_nulls(memory, nulls) for name, nulls in _with_all(sets).items()}


def _held_out_figures(memory: Any, sets: dict[str, list[LabelledQuery]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each held-out set's quality and profile figures, and (with more than one set) all of them together."""
    sets = _with_all(sets)
    quality = {name: evaluate(memory, queries) for name, queries in sets.items()}
    tasks = {
        name: _task_profile_figures(memory, queries, domains=False)["task_profiles"] for name, queries in sets.items()
    }
    return quality, tasks


def _task_profile_figures(memory: Any, queries: Sequence[LabelledQuery], *, domains: bool = True) -> dict[str, Any]:
    """The task-type profiles on against off, and (``domains``) domain detection (``bench.retrieval_tasks``)."""
    from ctxbus.api import Memory  # noqa: PLC0415
    from ctxbus.bench import retrieval_tasks  # noqa: PLC0415

    off = memory.settings.injection.model_copy(update={"task_profiles": False})
    plain = Memory(
        memory.settings.model_copy(update={"injection": off}), memory.embedder, memory.store, owns_store=False
    )
    with plain:
        compared = retrieval_tasks.compare(memory, plain, queries)
    if not domains:
        return {"task_profiles": compared}
    return {"task_profiles": compared, "domain_detection": retrieval_tasks.detect_domains(memory, queries)}
