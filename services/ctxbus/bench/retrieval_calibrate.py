"""Calibrating the relevance floor on the labelled set (``ctxbus bench retrieval --calibrate``): the store's
evidence for every graded query and topic null prompt from the real retriever, then the fit and its
cross-validation (:mod:`ctxbus.bench.abstain_calibration`, pure)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxbus.bench.retrieval import DATA_DIR, K, LabelledQuery, NullPrompt, load_memories, load_nulls, load_queries


def collect_samples(
    memory: Any, queries: Sequence[LabelledQuery], nulls: Sequence[NullPrompt], k: int = K
) -> list[Any]:
    """Each graded query's and topic null prompt's evidence and top ``k`` from the real retriever, floor off."""
    from ctxbus.bench.abstain_calibration import Sample  # noqa: PLC0415
    from ctxbus.components import retriever_handler  # noqa: PLC0415
    from ctxbus.contract.payloads import RetrievalRequested, Trigger  # noqa: PLC0415
    from ctxbus.contract.topics import Topics  # noqa: PLC0415
    from ctxbus.observability import Metrics  # noqa: PLC0415
    from ctxbus.retriever.request_scope import profile_for  # noqa: PLC0415

    handler = retriever_handler(
        memory.settings, memory.embedder, memory.store, Topics(memory.settings.topic_prefix), Metrics()
    )
    prompts = [(q.id, q.project, q.query, q.domain, q.relevant) for q in queries]
    prompts += [(n.id, n.project, n.query, None, {}) for n in nulls if not n.meta]
    samples = []
    for prompt_id, project, text, domain, relevant in prompts:
        request = RetrievalRequested(
            agent_name="bench", domain=domain, prompt=text, max_items=k, trigger=Trigger.USER_PROMPT
        )
        found = handler.retrieve(project, "bench", request, profile_for(request), abstain=False)
        best_first = sorted(found.hits, key=lambda h: (-h.score, h.item.id, h.item.project))
        if found.evidence is None:
            raise RuntimeError(f"{prompt_id}: the retriever reported no evidence")
        samples.append(Sample(prompt_id, found.evidence, tuple(h.item.id for h in best_first[:k]), dict(relevant)))
    return samples


def run_calibration(*, data_dir: Path = DATA_DIR, log: Callable[[str], None] = print) -> dict[str, Any]:
    """``--calibrate``: the relevance floor's calibration report (see ctxbus.bench.abstain_calibration)."""
    from ctxbus.api import Memory  # noqa: PLC0415
    from ctxbus.bench import abstain_calibration  # noqa: PLC0415
    from ctxbus.components import floor_policy  # noqa: PLC0415
    from ctxbus.memory.ingest import ingest  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    memories = load_memories(data_dir / "memories.jsonl")
    queries = load_queries(data_dir / "queries.jsonl")
    nulls = load_nulls(data_dir / "null_queries.jsonl")
    with tempfile.TemporaryDirectory(prefix="ctxbus-bench-calibrate-") as tmp:
        settings = Settings(data_dir=Path(tmp))
        with Memory.open(settings) as memory:
            ingest(memories, memory.embedder, memory.store, near_duplicate=None)
            log(f"stored {len(memories)} labelled memories; collecting evidence for the graded and null prompts")
            samples = collect_samples(memory, queries, nulls)
    meta = sum(1 for n in nulls if n.meta)
    return abstain_calibration.report(
        samples, K, abstain_calibration.DEFAULT_BUDGET, floor_policy(settings.injection), meta_prompts=meta
    )
