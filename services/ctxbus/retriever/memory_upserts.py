"""Memory through the bus: the owner of the vector store embeds and stores ``memory.upserted`` events, and answers
each with ``memory.stored`` once its items are written and searchable (what happened to every item, in order).

Tenant scope holds: an event may write only its own project and the global scope; an item of another project is
rejected (with the reason) and the others are stored. Upserts are idempotent (same project and id: the same point,
exact copies merge into the same item), so a redelivered event changes nothing; the runner skips an event it has
already answered (the answer's causation id is the event's id).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from ctxbus.adapters.kafka.runner import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import MemoryAction, MemoryStored, MemoryStoreResult, MemoryUpserted
from ctxbus.contract.topics import Topics
from ctxbus.memory.ingest import Action, IngestReport, ingest
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import Embedder, VectorStore

log = structlog.get_logger("ctxbus.memory")

SERVICE = "retriever"


def _result(item: MemoryItem, report: IngestReport, index: int) -> MemoryStoreResult:
    found = report.results[index]
    reason = None
    if found.action is Action.MERGED:
        reason = f"exact duplicate of {found.into!r} (same project, kind and normalised text)"
    else:
        missing = [
            old for project, old in report.supersede_missing if project == item.project and old in item.supersedes
        ]
        if missing:
            reason = "supersedes " + ", ".join(repr(m) for m in missing) + ": no such item"
    return MemoryStoreResult(
        id=found.id,
        project=found.project,
        action=MemoryAction(found.action.value),
        into=found.into,
        cluster_id=found.cluster_id,
        reason=reason,
    )


def stored_answer(items: Sequence[MemoryItem], project: str, report: IngestReport) -> MemoryStored:
    """The answer to an upsert of ``items`` by ``project``: one result per item in order (foreign ones rejected)."""
    results: list[MemoryStoreResult] = []
    written = 0
    for item in items:
        if item.project not in (project, GLOBAL_PROJECT):
            reason = f"an event of project {project!r} may write only that project and {GLOBAL_PROJECT!r}"
            results.append(
                MemoryStoreResult(id=item.id, project=item.project, action=MemoryAction.REJECTED, reason=reason)
            )
            continue
        results.append(_result(item, report, written))
        written += 1
    return MemoryStored(results=tuple(results), superseded=tuple(old for _, old in report.superseded))


class MemoryUpsertHandler:
    def __init__(self, embedder: Embedder, store: VectorStore, topics: Topics) -> None:
        self._embedder = embedder
        self._store = store
        self._topics = topics

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, MemoryUpserted):
            raise PoisonEvent(f"the memory consumer takes memory.upserted events, not {event.event_type}")
        upserted: MemoryUpserted = event.payload
        accepted = [i for i in upserted.items if i.project in (event.project, GLOBAL_PROJECT)]
        try:
            report = await asyncio.to_thread(ingest, accepted, self._embedder, self._store)
        except (OSError, TimeoutError) as exc:
            raise RetriableError(f"vector store unavailable: {exc}") from exc
        answer = stored_answer(upserted.items, event.project, report)
        counts = {a.value: sum(1 for r in answer.results if r.action is a) for a in MemoryAction}
        log.info(
            "memory_stored",
            project=event.project,
            **counts,
            clustered=report.clustered,
            merged_into=[(r.id, r.into) for r in report.merged],
            rejected_ids=[r.id for r in answer.results if r.action is MemoryAction.REJECTED],
            superseded=list(answer.superseded),
        )
        return [Output(self._topics.memory_stored, event.caused(answer, producer=SERVICE))]
