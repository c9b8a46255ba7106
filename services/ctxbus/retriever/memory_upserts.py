"""Memory through the bus: the owner of the vector store embeds and stores ``memory.upserted`` events.

Tenant scope holds: an event may write only its own project and the global scope. Upserts are
idempotent (same project and id: the same point), so a redelivered event changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from ctxbus.adapters.kafka.runner import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import MemoryUpserted
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.ports import Embedder, VectorStore

log = structlog.get_logger("ctxbus.memory")


class MemoryUpsertHandler:
    def __init__(self, embedder: Embedder, store: VectorStore) -> None:
        self._embedder = embedder
        self._store = store

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, MemoryUpserted):
            raise PoisonEvent(f"the memory consumer takes memory.upserted events, not {event.event_type}")
        upserted: MemoryUpserted = event.payload
        foreign = sorted({i.project for i in upserted.items} - {event.project, GLOBAL_PROJECT})
        if foreign:
            raise PoisonEvent(
                f"an event of project {event.project!r} may write only that project and {GLOBAL_PROJECT!r}, "
                f"not {foreign}"
            )
        try:
            report = await asyncio.to_thread(ingest, upserted.items, self._embedder, self._store)
        except (OSError, TimeoutError) as exc:
            raise RetriableError(f"vector store unavailable: {exc}") from exc
        log.info(
            "memory_upserted",
            project=event.project,
            items=report.upserted,
            merged=[(m.incoming_id, m.existing_id, m.similarity) for m in report.merged],
            superseded=[i for _, i in report.superseded],
        )
        return ()
