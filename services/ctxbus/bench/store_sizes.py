"""``ctxbus bench retrieval --store-sizes``: abstention at every store size (issue 21).

Every store of :mod:`ctxbus.bench.store_data` is built in a fresh embedded store (the real ingestion, the
real embedder: texts embedded once and remembered across stores) and each of its prompts is answered by the
real retriever with the floor off; :mod:`ctxbus.bench.store_floor` then judges the configured floor (and the
previous one, fitted on one 364-memory store) per store size, fits a floor on the ``fit`` samples and judges
it on the held-out ones.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxbus.bench.store_data import (
    FIT,
    HELD_OUT,
    RETRIEVAL_DIR,
    SIZES,
    STORES_DIR,
    StorePlan,
    labelled_stores,
    load_padding,
    team_stores,
)
from ctxbus.bench.store_floor import Sample, by_size, describe, fit
from ctxbus.core.abstain import FloorPolicy
from ctxbus.ports import Embedder, Vector

K = 10
#: the floor before issue 21 (fitted on one 364-memory store), judged beside the configured one
PREVIOUS = FloorPolicy(
    min_relevance=0.458, pack_size=8, margin_weight=-0.5, keyword_weight=0.2, size_slope=0.0, margin_from=0
)


class RememberingEmbedder:
    """The real embedder, each text embedded once for all the stores of a run."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._texts: dict[str, Vector] = {}
        self._queries: dict[str, Vector] = {}

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        missing = sorted({t for t in texts if t not in self._texts}, key=len)
        for start in range(0, len(missing), 16):  # sorted by length, small batches (see NOTES: memory)
            chunk = missing[start : start + 16]
            self._texts.update(zip(chunk, self.inner.embed(chunk), strict=True))
        return [self._texts[t] for t in texts]

    def embed_query(self, text: str) -> Vector:
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def collect(plans: Sequence[StorePlan], embedder: Embedder, root: Path, log: Callable[[str], None]) -> list[Sample]:
    """Each plan's prompts answered in a fresh store of its items (the floor off)."""
    from ctxbus.adapters.store_edge import EdgeVectorStore  # noqa: PLC0415
    from ctxbus.components import retriever_handler  # noqa: PLC0415
    from ctxbus.contract.payloads import RetrievalRequested, Trigger  # noqa: PLC0415
    from ctxbus.contract.topics import Topics  # noqa: PLC0415
    from ctxbus.memory.ingest import ingest  # noqa: PLC0415
    from ctxbus.observability import Metrics  # noqa: PLC0415
    from ctxbus.retriever.request_scope import profile_for  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    samples: list[Sample] = []
    for number, plan in enumerate(plans, start=1):
        settings = Settings(data_dir=root / f"store-{number}")
        with EdgeVectorStore(settings.store_dir, model_id=embedder.model_id, dim=embedder.dim) as store:
            ingest(plan.items, embedder, store, near_duplicate=None)
            handler = retriever_handler(settings, embedder, store, Topics(settings.topic_prefix), Metrics())
            for prompt in plan.prompts:
                request = RetrievalRequested(
                    agent_name="bench", prompt=prompt.query, max_items=K, trigger=Trigger.USER_PROMPT
                )
                found = handler.retrieve(plan.project, "bench", request, profile_for(request), abstain=False)
                if found.evidence is None:
                    raise RuntimeError(f"{plan.name}/{prompt.id}: the retriever reported no evidence")
                ranked = tuple(h.item.id for h in found.hits[:K])
                samples.append(
                    Sample(
                        prompt.id,
                        plan.name,
                        plan.kind,
                        plan.size,
                        prompt.set,
                        replace(found.evidence, store_size=len(plan.items)),
                        ranked,
                        frozenset(prompt.relevant),
                        prompt.category,
                    )
                )
        if number % 10 == 0 or number == len(plans):
            log(f"  {number} of {len(plans)} stores answered ({len(samples)} prompts)")
    return samples


def fitted_on(sample: Sample) -> bool:
    """The samples a floor is fitted on: the ``fit`` set's labelled stores at every size and its teams' stores at
    their own size. Team stores grown with padding are judged, not fitted on: there ungraded notes of other teams
    compete with a team's few conventions (their rates are upper bounds)."""
    return sample.set == FIT and (sample.kind == "labelled" or sample.store.endswith("@own"))


def _judged(samples: Sequence[Sample], policy: FloorPolicy | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for which in (FIT, HELD_OUT):
        out[which] = {str(size): r.as_dict() for size, r in by_size(samples, policy, set=which).items()}
        for kind in ("labelled", "team"):
            out[f"{which}/{kind}"] = {
                str(size): r.as_dict() for size, r in by_size(samples, policy, set=which, kind=kind).items()
            }
    return out


def run(
    *,
    configured: FloorPolicy,
    sizes: Sequence[int] = SIZES,
    data_dir: Path = RETRIEVAL_DIR,
    stores_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    from ctxbus.bench.retrieval import load_memories  # noqa: PLC0415
    from ctxbus.components import open_embedder  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    memories = load_memories(data_dir / "memories.jsonl")
    padding = load_padding(data_dir / "padding.jsonl")
    plans = labelled_stores(memories, padding, sizes=sizes, data_dir=data_dir)
    teams = team_stores(padding, sizes=sizes, stores_dir=stores_dir or STORES_DIR)
    plans += teams
    log(
        f"{len(plans)} stores ({len(teams)} of teams' conventions), {sum(len(p.prompts) for p in plans)} prompts; "
        f"{len(padding)} padding memories"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ctxbus-bench-sizes-") as tmp:
        embedder = RememberingEmbedder(open_embedder(Settings(data_dir=Path(tmp) / "model")))
        samples = collect(plans, embedder, Path(tmp), log)
    log(f"answered in {time.perf_counter() - started:.1f} s; fitting the floor on the fit stores")
    fitted, objective = fit([s for s in samples if fitted_on(s)], base=configured)
    return {
        "k": K,
        "stores": len(plans),
        "samples": len(samples),
        "stores_per_size": {
            str(size): sum(1 for p in plans if p.size == size) for size in sorted({p.size for p in plans})
        },
        "policies": {
            "configured": {"policy": describe(configured), "rates": _judged(samples, configured)},
            "previous": {"policy": describe(PREVIOUS), "rates": _judged(samples, PREVIOUS)},
            "none": {"policy": None, "rates": _judged(samples, None)},
            "fitted": {"policy": describe(fitted), "objective": objective, "rates": _judged(samples, fitted)},
        },
    }


def _cell(r: dict[str, Any], rate: str, count: str, total: str) -> str:
    if not r[total]:
        return "-"
    low, high = r[rate.replace("_rate", "_interval")]
    return f"{r[rate]:.3f} [{low:.2f}, {high:.2f}] {r[count]}/{r[total]}"


def print_report(result: dict[str, Any]) -> None:
    """The per-size table of each policy, fit and held-out apart."""
    print(
        f"abstention by store size: {result['stores']} stores, {result['samples']} prompts answered "
        f"(false rejection: an on-topic prompt without any relevant item in its top {result['k']}; "
        "false injection: a null prompt that got any item; exact 95% intervals)"
    )
    for name, entry in result["policies"].items():
        policy = entry["policy"]
        print(f"\n{name}: {policy if policy is not None else 'no floor'}")
        if "objective" in entry:
            got = entry["objective"]
            print(f"  fitted on the fit stores: mean cell {got['mean']:.3f}, worst cell {got['worst']:.3f}")
        for which, table in entry["rates"].items():
            print(f"  {which}")
            for size, r in table.items():
                frr = _cell(r, "false_rejection_rate", "false_rejections", "on_topic")
                fir = _cell(r, "false_injection_rate", "false_injections", "nulls")
                print(f"    {size:>5} items  false rejection {frr:<28}  false injection {fir}")
