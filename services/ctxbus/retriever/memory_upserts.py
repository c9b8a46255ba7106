"""Memory through the bus: the owner of the vector store embeds and stores ``memory.upserted`` events, and answers
each with ``memory.stored`` once its items are written and searchable (what happened to every item, in order).

Tenant scope holds: an event may write only its own project and the global scope; an item of another project is
rejected (with the reason) and the others are stored. A global item is taken only from a record that carries the
producer's explicit marker (:mod:`ctxbus.memory.global_scope`); without it, it is rejected with the reason.
Upserts are idempotent (same project and id: the same point, exact copies merge into the same item), so a
redelivered event changes nothing; the runner skips an event it has already answered (the answer's causation id
is the event's id).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import structlog

from ctxbus.adapters.curation_ledger import CurationLedger, Key
from ctxbus.adapters.kafka.handling import RECORD_HEADERS, Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import MemoryAction, MemoryStored, MemoryStoreResult, MemoryUpserted
from ctxbus.contract.topics import Topics
from ctxbus.core.curation import allow_forgotten_marked
from ctxbus.memory import global_scope
from ctxbus.memory.ingest import Action, IngestReport, ingest
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import Embedder, VectorStore
from ctxbus.retriever.memory_curation import admit_items

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


def _rejection(
    item: MemoryItem, project: str, global_allowed: bool, forgotten: Mapping[tuple[str, str], str] | None = None
) -> str | None:
    """Why the store's owner does not write ``item`` of an upsert by ``project`` (None: it does); ``forgotten``:
    the reasons of the items curation refuses (see ctxbus.retriever.memory_curation)."""
    refused = (forgotten or {}).get((item.project, item.id))
    if refused is not None:
        return refused
    if item.project not in (project, GLOBAL_PROJECT):
        return f"an event of project {project!r} may write only that project and {GLOBAL_PROJECT!r}"
    if item.project == GLOBAL_PROJECT and not global_allowed:
        return f"{global_scope.refusal(global_scope.BUS_MARKER)}; the record has none"
    return None


def accepted(items: Sequence[MemoryItem], project: str, *, global_allowed: bool) -> list[MemoryItem]:
    """The items of an upsert by ``project`` that are written, in order (before curation's refusals)."""
    return [i for i in items if _rejection(i, project, global_allowed) is None]


def stored_answer(
    items: Sequence[MemoryItem],
    project: str,
    report: IngestReport,
    *,
    global_allowed: bool,
    forgotten: Mapping[tuple[str, str], str] | None = None,
) -> MemoryStored:
    """The answer to an upsert of ``items`` by ``project``: one result per item in order (foreign items, global
    ones without ``global_allowed`` and forgotten ones, ``forgotten``, rejected with the reason)."""
    results: list[MemoryStoreResult] = []
    written = 0
    for item in items:
        reason = _rejection(item, project, global_allowed, forgotten)
        if reason is not None:
            results.append(
                MemoryStoreResult(id=item.id, project=item.project, action=MemoryAction.REJECTED, reason=reason)
            )
            continue
        results.append(_result(item, report, written))
        written += 1
    return MemoryStored(results=tuple(results), superseded=tuple(old for _, old in report.superseded))


class MemoryUpsertHandler:
    """``ledger``: the curation ledger; a forgotten item is refused unless explicitly re-added after its forget.
    ``learned``: called with the items written, so they get what outcomes already taught about them (a member
    whose memory loop lags its learning loops, such as one that joined late, stores an item after the outcomes
    that count for it; see ctxbus.learning.handler.relearn)."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        topics: Topics,
        ledger: CurationLedger | None = None,
        learned: Callable[[set[Key]], object] | None = None,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._topics = topics
        self._ledger = ledger
        self._learned = learned

    def _write_with(
        self, headers: Sequence[tuple[str, bytes]], items: Sequence[MemoryItem], event: AnyEnvelope
    ) -> tuple[IngestReport, dict[Key, str]]:
        """Write in a worker thread (the record's headers passed in: a context variable stays in its thread)."""
        refused: list[tuple[MemoryItem, str]] = []
        if self._ledger is None:
            admitted = list(items)
            report = ingest(items, self._embedder, self._store)
        else:
            allow = allow_forgotten_marked(headers)
            with self._ledger.lock:  # no forget slips in between the check and the write
                admitted, refused = admit_items(self._ledger, items, event.emitted_at, allow_forgotten=allow)
                report = ingest(admitted, self._embedder, self._store)
        if self._learned is not None and admitted:
            self._learned({(i.project, i.id) for i in admitted})
        return report, {(i.project, i.id): r for i, r in refused}

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, MemoryUpserted):
            raise PoisonEvent(f"the memory consumer takes memory.upserted events, not {event.event_type}")
        upserted: MemoryUpserted = event.payload
        global_allowed = global_scope.marked(RECORD_HEADERS.get())
        written = accepted(upserted.items, event.project, global_allowed=global_allowed)
        headers = RECORD_HEADERS.get()
        try:
            report, forgotten = await asyncio.to_thread(self._write_with, headers, written, event)
        except (OSError, TimeoutError) as exc:
            raise RetriableError(f"vector store unavailable: {exc}") from exc
        answer = stored_answer(
            upserted.items, event.project, report, global_allowed=global_allowed, forgotten=forgotten
        )
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
