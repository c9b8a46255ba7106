"""A forget, pin or unpin made by hand (``ctxbus memory forget|pin|unpin``, ``Memory.forget|pin|unpin``, the
dashboard): through the bus when there is one, else applied to the caller's store at once.

As with outcomes (:mod:`ctxbus.learning.record`): with a configured broker or the running stack, the event is
published on ``memory.curated`` and the store's owner applies it (so a restart or a replay keeps it); a broker
that cannot be reached is an error, never a silent local write. With none, the caller owns the store: the same
rules are applied to it and to this data directory's curation ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import CurationAction, MemoryCurated
from ctxbus.contract.topics import Topics
from ctxbus.memory import global_scope
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import VectorStore
from ctxbus.retriever.memory_curation import Curated, admit_items, apply_curation
from ctxbus.settings import Settings

#: the session the curation events travel in (one partition per project: a project's curations stay in order)
SESSION = "memory-curation"
#: seconds to reach the broker and have the event acknowledged
PUBLISH_TIMEOUT_S = 15.0


class CurationError(ValueError):
    """A curation that cannot be made: bad input, or a configured broker out of reach."""


def curation_event(
    project: str, action: CurationAction | str, ids: Sequence[str], *, note: str | None = None, source: str = "api"
) -> Envelope[MemoryCurated]:
    """The checked event for a curation of ``ids`` of ``project``."""
    if not project or not project.strip():
        raise CurationError("the project is empty or blank")
    try:
        payload = MemoryCurated(action=CurationAction(action), ids=tuple(dict.fromkeys(ids)), note=note)
        return Envelope.root(payload, project=project.strip(), session_id=SESSION, producer=source)
    except ValueError as exc:
        raise CurationError(f"cannot {action} {list(ids)[:5]}: {exc}") from exc


async def publish(config: KafkaClientConfig, topics: Topics, event: Envelope[MemoryCurated], client_id: str) -> None:
    """Publish and wait for the acknowledgement (a global item's curation carries the global-write marker)."""
    publisher = EventPublisher(config, client_id, schemas_topic=topics.schemas)
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_S):
            try:
                await publisher.start()
                record = publisher.prepare(topics.memory_curated, event)
                if event.project == GLOBAL_PROJECT:
                    headers = [*record.headers, global_scope.marker()]
                    record = publisher.prepare_raw(record.topic, record.value, record.key, headers)
                await publisher.send(record)
            finally:
                await publisher.stop()
    except TimeoutError as exc:
        raise CurationError(
            f"the broker at {config.bootstrap_servers} did not acknowledge within {PUBLISH_TIMEOUT_S:.0f} s"
        ) from exc
    except CurationError:
        raise
    except Exception as exc:  # aiokafka's connection errors: the caller gets one clear line
        raise CurationError(f"cannot publish to the broker at {config.bootstrap_servers}: {exc}") from exc


def apply_locally(settings: Settings, store: VectorStore, event: Envelope[MemoryCurated]) -> Curated:
    """Apply the curation to ``store`` (the caller owns it) and this data directory's curation ledger."""
    ledger = CurationLedger(settings.curation_db)
    try:
        payload = event.payload
        return apply_curation(store, ledger, event.project, payload.action, payload.ids, event.emitted_at)
    finally:
        ledger.close()


def admit_locally(
    settings: Settings, items: Sequence[MemoryItem], at: datetime, *, allow_forgotten: bool
) -> tuple[list[MemoryItem], list[tuple[MemoryItem, str]]]:
    """The items an import into the caller's own store may write, and the forgotten ones refused (with why)."""
    ledger = CurationLedger(settings.curation_db)
    try:
        with ledger.lock:
            return admit_items(ledger, items, at, allow_forgotten=allow_forgotten)
    finally:
        ledger.close()
