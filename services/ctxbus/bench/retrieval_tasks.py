"""The task-type profiles' effect on the labelled retrieval set (part of ``ctxbus bench retrieval``).

Every query is answered by the full ranking twice, with the task-type profiles
(:mod:`ctxbus.core.task_profiles`) and without them (every type ranked as ``general``), everything
else equal (same store, same domain, same agent profile). Two ways to give a query its task type:

* **labelled**: the ``task_type`` written into ``queries.jsonl`` (see its README for the rules);
* **classified**: none given, the retriever's classifier decides (as for a hook's prompt).

Per task type: the number of queries, nDCG@10 / recall@10 / MRR with and without the profiles, and
how many queries got better, worse or stayed equal in nDCG@10, and how sure the difference is
(:mod:`ctxbus.bench.intervals`): the mean nDCG@10 difference with its paired bootstrap 95% interval, the
sign test of better against worse, and the verdict (``better`` or ``worse`` only when the interval leaves
out 0, else ``level``: the queries cannot tell the profile from none). Also domain detection: every query
that has a labelled domain is asked again without it, and the domain the retriever detected is
compared with the label (detected at all, and correct when detected).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from ctxbus.bench.intervals import bootstrap_mean, sign_test, verdict
from ctxbus.bench.ir_metrics import ndcg_at, recall_at, reciprocal_rank

K = 10
#: The key of the held-out sets' figures taken together (``ctxbus bench retrieval``).
HELD_OUT_ALL = "all"
#: nDCG differences below this are a tie
TIE = 1e-9


def held_out_name(name: str) -> str:
    """How the report names a held-out set (its file), or all of them together."""
    return "all held-out sets" if name == HELD_OUT_ALL else name


class Query(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def project(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def domain(self) -> str | None: ...
    @property
    def relevant(self) -> dict[str, int]: ...
    @property
    def task_type(self) -> str | None: ...


def _scores(ids: Sequence[str], relevant: dict[str, int]) -> dict[str, float]:
    return {
        "ndcg@10": ndcg_at(ids, relevant, K),
        "recall@10": recall_at(ids, relevant, K),
        "mrr": reciprocal_rank(ids, relevant),
    }


def _summary(pairs: Sequence[tuple[dict[str, float], dict[str, float]]]) -> dict[str, Any]:
    def mean(rows: Sequence[dict[str, float]], key: str) -> float:
        return round(statistics.fmean(r[key] for r in rows), 4)

    with_, without = [w for w, _ in pairs], [o for _, o in pairs]
    deltas = [w["ndcg@10"] - o["ndcg@10"] for w, o in pairs]
    better, worse = sum(1 for d in deltas if d > TIE), sum(1 for d in deltas if d < -TIE)
    interval = bootstrap_mean(deltas)
    return {
        "queries": len(pairs),
        "with": {k: mean(with_, k) for k in ("ndcg@10", "recall@10", "mrr")},
        "without": {k: mean(without, k) for k in ("ndcg@10", "recall@10", "mrr")},
        "better": better,
        "worse": worse,
        "equal": sum(1 for d in deltas if abs(d) <= TIE),
        # how sure the difference is: its mean over the queries, the paired bootstrap interval, the sign test
        "ndcg_delta": round(statistics.fmean(deltas), 4),
        "ndcg_delta_ci95": [round(interval[0], 4), round(interval[1], 4)],
        "sign_test_p": round(sign_test(better, worse), 4),
        "verdict": verdict(interval),
    }


def compare(memory: Any, plain: Any, queries: Sequence[Query]) -> dict[str, Any]:
    """Profiles on (``memory``) against off (``plain``, same store), by labelled and by classified task type."""
    labelled: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = defaultdict(list)
    classified: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = defaultdict(list)
    agree = 0

    def pair(q: Query, task_type: str | None) -> tuple[str | None, tuple[dict[str, float], dict[str, float]]]:
        on = memory.search(q.project, q.query, k=K, domain=q.domain, task_type=task_type)
        off = plain.search(q.project, q.query, k=K, domain=q.domain, task_type=task_type)
        scores = (_scores([f.id for f in on.items], q.relevant), _scores([f.id for f in off.items], q.relevant))
        return on.task_type, scores

    for q in queries:
        if q.task_type is not None:
            labelled[q.task_type].append(pair(q, q.task_type)[1])
        kind, scores = pair(q, None)
        classified[kind or "general"].append(scores)
        agree += int(kind is not None and kind == q.task_type)
    every_labelled = [p for rows in labelled.values() for p in rows]
    every_classified = [p for rows in classified.values() for p in rows]
    return {
        "labelled": {t: _summary(rows) for t, rows in sorted(labelled.items())},
        "labelled_all": _summary(every_labelled) if every_labelled else {},
        "classified": {t: _summary(rows) for t, rows in sorted(classified.items())},
        "classified_all": _summary(every_classified) if every_classified else {},
        "classifier_agrees_with_label": agree,
        "labelled_queries": len(every_labelled),
    }


def detect_domains(memory: Any, queries: Sequence[Query]) -> dict[str, Any]:
    """Queries with a labelled domain, asked without it: how often a domain was detected, and rightly."""
    asked = detected = correct = 0
    for q in queries:
        if not q.domain:
            continue
        asked += 1
        result = memory.search(q.project, q.query, k=K, task_type=q.task_type)
        if result.domain_source == "detected":
            detected += 1
            correct += int(result.domain == q.domain)
    return {"queries": asked, "detected": detected, "correct": correct}


def print_report(result: dict[str, Any]) -> None:
    tasks = result["task_profiles"]
    print(
        f"task-type profiles, full ranking with them against without them (nDCG@10, recall@10, MRR; "
        f"better/worse/equal queries by nDCG@10); labelled task types ({tasks['labelled_queries']} queries):"
    )
    _table({**tasks["labelled"], "all": tasks["labelled_all"]})
    agree, total = tasks["classifier_agrees_with_label"], tasks["labelled_queries"]
    print(f"  classified task types (the classifier agrees with the label on {agree} of {total}):")
    _table({**tasks["classified"], "all": tasks["classified_all"]})
    d = result["domain_detection"]
    print(
        f"domain detection (labelled domain withheld): {d['queries']} queries, a domain detected for "
        f"{d['detected']}, the labelled one for {d['correct']} of those"
    )


def print_held_out(result: dict[str, Any]) -> None:
    """The profiles on each held-out set of graded queries (labelled task types), and on all of them together."""
    for name, tasks in (result.get("task_profiles_held_out") or {}).items():
        queries = tasks["labelled_queries"]
        print(f"  held out ({held_out_name(name)}: {queries} graded queries nothing was tuned on), labelled types:")
        _table({**tasks["labelled"], "all": tasks["labelled_all"]})


def _table(rows: dict[str, dict[str, Any]]) -> None:
    print(
        f"    {'type':<9} {'n':>4}  {'nDCG with':>9} {'without':>8}  {'R@10 with':>9} {'without':>8}  "
        f"{'MRR with':>8} {'without':>8}  {'+/-/=':>9}  {'nDCG diff, 95% interval':>25}  {'sign p':>6}  shown"
    )
    for name, s in rows.items():
        if not s:
            continue
        w, o = s["with"], s["without"]
        print(
            f"    {name:<9} {s['queries']:>4}  {w['ndcg@10']:>9.3f} {o['ndcg@10']:>8.3f}  {w['recall@10']:>9.3f} "
            f"{o['recall@10']:>8.3f}  {w['mrr']:>8.3f} {o['mrr']:>8.3f}  "
            f"{s['better']:>3}/{s['worse']}/{s['equal']:<4}  {_interval(s):>25}  {s['sign_test_p']:>6.3f}  "
            f"{s['verdict']}"
        )


def _interval(summary: dict[str, Any]) -> str:
    low, high = summary["ndcg_delta_ci95"]
    return f"{summary['ndcg_delta']:+.3f} [{low:+.3f}, {high:+.3f}]"
