"""What a fleet run compares at the end: every retriever's learned values (read from its own store once it has
stopped), those of a single member run over the same events, and every retry's pre-context against the attempts
recorded before the retry was sent."""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.bench.fleet_load import Retry, attempt_files
from ctxbus.components import open_built_store
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.topics import Topics
from ctxbus.core.learning import learned_conviction, learned_success_rate, learned_usage
from ctxbus.learning.handler import LearningHandler, relearn
from ctxbus.ports import Embedder, VectorStore
from ctxbus.retriever.memory_upserts import MemoryUpsertHandler
from ctxbus.settings import Settings

#: (project, item id) -> (conviction, success rate, usage count) as ranking sees them
Learned = dict[tuple[str, str], tuple[float, float | None, int]]


def learned_of(store: VectorStore, project: str) -> Learned:
    return {
        (i.project, i.id): (learned_conviction(i), learned_success_rate(i), learned_usage(i))
        for i in store.items(project)
    }


def member_learned(data_dir: Path, project: str) -> Learned:
    """A stopped member's learned values, from its own store."""
    store = open_built_store(Settings(data_dir=data_dir))
    if store is None:
        raise FileNotFoundError(f"no store under {data_dir}")
    try:
        return learned_of(store, project)
    finally:
        store.close()


async def single_member(
    template: Path,
    work: Path,
    embedder: Embedder,
    upserts: Sequence[AnyEnvelope],
    injections: Sequence[AnyEnvelope],
    outcomes: Sequence[AnyEnvelope],
    project: str,
) -> Learned:
    """One member's memory and learning loops over the same events, in process and in topic order, on its own copy
    of the store template: what a fleet of one would have learned."""
    shutil.copytree(template / "store", work / "store")
    store = open_built_store(Settings(data_dir=work))
    if store is None:
        raise FileNotFoundError(f"no store under {template}")
    ledger, curation = LearningLedger(work / "learning.sqlite3"), CurationLedger(work / "curation.sqlite3")
    try:
        memory = MemoryUpsertHandler(embedder, store, Topics("fleet"), curation, learned=relearn(ledger, store))
        learning = LearningHandler(ledger, store)
        for event in upserts:
            await memory(event)
        for event in injections:
            await learning.injections(event)
        for event in outcomes:
            await learning.outcomes(event)
        return learned_of(store, project)
    finally:
        store.close()
        ledger.close()
        curation.close()


def disagreements(members: Mapping[str, Learned], reference: Learned) -> list[str]:
    """Every item on which a member differs from the single member (missing, extra or another value)."""
    found = []
    for name, learned in sorted(members.items()):
        for key in sorted(set(learned) | set(reference)):
            mine, truth = learned.get(key), reference.get(key)
            if mine != truth:
                found.append(f"{name} {key[1]}: {mine} against {truth}")
    return found


def missing_attempts(retries: Sequence[Retry], contexts: Mapping[str, str]) -> list[str]:
    """Retries whose injected pre-context does not list every attempt recorded before them: every such attempt's
    file, and an attempt number it continues from at least as late (an attempt recorded after the retry was sent,
    before it was assembled, may be listed too: the load goes on while a retry waits)."""
    found = []
    for retry in retries:
        context = contexts.get(retry.correlation_id)
        if context is None:
            found.append(f"{retry.task_id} after attempt {retry.attempts}: no injection")
            continue
        number = re.search(r"Attempt #(\d+) ", context)
        absent = [] if number and int(number.group(1)) > retry.attempts else [f"Attempt #{retry.attempts + 1} or later"]
        absent += [
            f for f in (attempt_files(retry.task_id, n) for n in range(1, retry.attempts + 1)) if f not in context
        ]
        if absent:
            found.append(f"{retry.task_id} after attempt {retry.attempts}: {absent} missing from {context[:160]!r}")
    return found


def moved(learned: Learned, base: Learned) -> int:
    """Items whose learned values differ from the store template's (outcomes moved them)."""
    return sum(1 for key, values in learned.items() if base.get(key) != values)
