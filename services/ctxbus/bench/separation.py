"""``ctxbus bench retrieval --separation``: how well the embedder's similarity alone tells an on-topic prompt from a
null one, in the teams' convention stores at their own size (5-15 items; issue 21).

The relevance floor can only keep a request whose evidence stands above the null prompts' evidence. The evidence
it starts from is the best cosine between the prompt and a memory of the store. This screen asks, with no floor and
no ranking beyond cosine, for each team store of ``data/stores/`` (fit and held-out sets apart):

- **top-1 / top-3**: an on-topic prompt's own convention (any of its relevant items) ranked first / in the first
  three of its store by cosine;
- **best cosine** of on-topic prompts against null prompts (and against the near misses alone): quantiles, and the
  **AUC** (the chance that an on-topic prompt's best cosine is above a null prompt's; 0.5 is chance, 1.0 a clean
  cut);
- **the best single threshold**: the cut on the best cosine, chosen on the judged prompts themselves, with the
  smallest larger-of-the-two error (false rejection: an on-topic prompt under the cut or whose relevant items are
  not in the top :data:`K`; false injection: a null prompt at or above it). Chosen on the same prompts it is judged
  on, it is a bound no floor built on this similarity alone can beat;
- **per-query latency** of ``embed_query`` (each prompt embedded once, nothing remembered).

It takes any ``Embedder`` (the port), so a candidate model is screened in seconds before the full
``--store-sizes`` run (minutes), which refits and judges the floor with the real retriever.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxbus.bench.store_data import FIT, HELD_OUT, STORES_DIR, StorePlan, team_stores
from ctxbus.ports import Embedder

#: the ranked items a request gets at most (an on-topic prompt whose items are all below it is a false rejection)
K = 10
QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True, slots=True)
class Scored:
    """One prompt in its team's store, by cosine alone."""

    prompt_id: str
    store: str
    set: str
    #: ``on_topic``, or the null prompt's category (near_miss, chore, smalltalk, other_stack)
    category: str
    best: float
    #: 1-based rank of the first relevant item (0: a null prompt)
    rank: int

    @property
    def on_topic(self) -> bool:
        return self.category == "on_topic"


def score_store(plan: StorePlan, embedder: Embedder, latencies: list[float] | None = None) -> list[Scored]:
    """Each prompt of ``plan`` against its items, by cosine (the embedder's vectors are unit vectors)."""
    ids = [item.id for item in plan.items]
    docs = np.asarray(embedder.embed([item.embedding_text() for item in plan.items]), dtype=np.float64)
    out = []
    for prompt in plan.prompts:
        started = time.perf_counter()
        query = np.asarray(embedder.embed_query(prompt.query), dtype=np.float64)
        if latencies is not None:
            latencies.append(time.perf_counter() - started)
        sims = docs @ query
        order = [ids[i] for i in np.argsort(-sims, kind="stable")]
        rank = min((order.index(i) + 1 for i in prompt.relevant if i in ids), default=0)
        category = prompt.category if not prompt.relevant else "on_topic"
        out.append(Scored(prompt.id, plan.name, prompt.set, category, float(sims.max()), rank))
    return out


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counting half (the Mann-Whitney statistic)."""
    if not positives or not negatives:
        return float("nan")
    pos = np.asarray(positives)[:, None]
    neg = np.asarray(negatives)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def best_threshold(scored: Sequence[Scored], k: int = K) -> dict[str, float]:
    """The cut on the best cosine with the smallest larger error rate, chosen on ``scored`` itself."""
    on = [s for s in scored if s.on_topic]
    null = [s for s in scored if not s.on_topic]
    if not on or not null:
        return {"threshold": float("nan"), "false_rejection": float("nan"), "false_injection": float("nan")}
    cuts = sorted({s.best for s in scored} | {max(s.best for s in scored) + 1e-9})
    best: tuple[float, float, float, float] | None = None
    for cut in cuts:
        rejected = sum(1 for s in on if s.best < cut or not 0 < s.rank <= k) / len(on)
        injected = sum(1 for s in null if s.best >= cut) / len(null)
        key = (max(rejected, injected), rejected + injected, cut, rejected)
        if best is None or key < best:
            best = key
    assert best is not None
    _worst, total, cut, rejected = best
    return {"threshold": cut, "false_rejection": rejected, "false_injection": total - rejected}


def summary(scored: Sequence[Scored]) -> dict[str, Any]:
    """The separation figures of a set of scored prompts."""
    on = [s.best for s in scored if s.on_topic]
    null = [s.best for s in scored if not s.on_topic]
    near = [s.best for s in scored if s.category == "near_miss"]
    ranks = [s.rank for s in scored if s.on_topic]

    def quantiles(values: Sequence[float]) -> list[float]:
        return [float(np.quantile(values, q)) for q in QUANTILES] if values else []

    return {
        "on_topic": len(on),
        "null": len(null),
        "near_miss": len(near),
        "top1": sum(1 for r in ranks if r == 1) / len(ranks) if ranks else float("nan"),
        "top3": sum(1 for r in ranks if 0 < r <= 3) / len(ranks) if ranks else float("nan"),
        "on_topic_best": quantiles(on),
        "null_best": quantiles(null),
        "near_miss_best": quantiles(near),
        "auc": auc(on, null),
        "auc_near_miss": auc(on, near),
        "best_threshold": best_threshold(scored),
    }


def run(
    embedder: Embedder | None = None,
    *,
    stores_dir: Path = STORES_DIR,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The separation figures of ``embedder`` (the configured one by default) on every team store, per set."""
    if embedder is None:
        from ctxbus.components import open_embedder  # noqa: PLC0415
        from ctxbus.settings import Settings  # noqa: PLC0415

        embedder = open_embedder(Settings())
    plans = team_stores((), stores_dir=stores_dir)  # no padding: each team's store at its own size
    latencies: list[float] = []
    embedder.embed_query("warm up")
    scored = [s for plan in plans for s in score_store(plan, embedder, latencies)]
    log(f"{len(plans)} team stores, {len(scored)} prompts scored with {embedder.model_id}")
    return {
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "k": K,
        "stores": len(plans),
        "sets": {which: summary([s for s in scored if s.set == which]) for which in (FIT, HELD_OUT)},
        "query_ms": {
            "median": 1000 * statistics.median(latencies) if latencies else float("nan"),
            "p95": 1000 * float(np.quantile(latencies, 0.95)) if latencies else float("nan"),
        },
    }


def print_report(result: dict[str, Any]) -> None:
    print(
        f"separation by cosine alone: {result['model_id']} ({result['dim']} dims), {result['stores']} team stores "
        f"at their own size; query {result['query_ms']['median']:.1f} ms median, {result['query_ms']['p95']:.1f} ms p95"
    )
    for which, s in result["sets"].items():
        cut = s["best_threshold"]
        print(f"  {which}: {s['on_topic']} on-topic, {s['null']} null ({s['near_miss']} near misses)")
        print(f"    own convention first {s['top1']:.3f}, in the first three {s['top3']:.3f}")
        for label, key in (("on-topic", "on_topic_best"), ("null", "null_best"), ("near miss", "near_miss_best")):
            values = " / ".join(f"{v:.3f}" for v in s[key])
            print(f"    best cosine p10 / p50 / p90, {label:<9} {values}")
        print(f"    AUC on-topic vs null {s['auc']:.3f}, vs near misses {s['auc_near_miss']:.3f}")
        print(
            f"    best single cut (chosen on these prompts) {cut['threshold']:.3f}: false rejection "
            f"{cut['false_rejection']:.3f}, false injection {cut['false_injection']:.3f}"
        )
