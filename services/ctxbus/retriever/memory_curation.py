"""Curation by the store's owner: forgetting and pinning items, and refusing upserts of forgotten ones.

``memory.curated`` events (``ctxbus memory forget|pin|unpin``, the Python API, the dashboard) arrive here through
the bus while the stack runs; with no stack the same functions are applied to the caller's own store. The rules
are :mod:`ctxbus.core.curation`'s; the state is the curation ledger's (what was forgotten stays known after the
store deleted the item), so a restart, a replay of the topics or a re-import never brings a forgotten item back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from ctxbus.adapters.curation_ledger import CurationLedger, Key
from ctxbus.adapters.kafka.handling import RECORD_HEADERS, Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import CurationAction, MemoryCurated
from ctxbus.core.curation import ForgetMark, PinMark, admit, after_forget, after_pin
from ctxbus.memory import global_scope
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.ports import VectorStore

log = structlog.get_logger("ctxbus.memory")


@dataclass(frozen=True, slots=True)
class Curated:
    """What one curation did: the ids it changed in the store, and those the store does not hold."""

    action: CurationAction
    project: str
    changed: tuple[str, ...]
    missing: tuple[str, ...]


def apply_curation(
    store: VectorStore,
    ledger: CurationLedger,
    project: str,
    action: CurationAction,
    ids: Sequence[str],
    at: datetime,
) -> Curated:
    """Apply a forget, pin or unpin made at ``at`` to ``store`` and ``ledger``. A forget is remembered even for an
    id the store does not hold (an older upsert of it may still arrive); a forgotten item loses its pin."""
    with ledger.lock:
        return _apply(store, ledger, project, action, list(dict.fromkeys(ids)), at)


def _apply(
    store: VectorStore, ledger: CurationLedger, project: str, action: CurationAction, wanted: list[str], at: datetime
) -> Curated:
    keys: list[Key] = [(project, i) for i in wanted]
    held = {i.id for i in store.get(project, wanted)}
    if action is CurationAction.FORGET:
        marks = ledger.forget_marks(keys)
        updated = {k: after_forget(marks.get(k), at) for k in keys}
        ledger.set_forget_marks(updated)
        gone = [i for i in wanted if updated[(project, i)].forgotten]
        unpins = {k: p for k in keys if (p := after_pin(ledger.pin_marks([k]).get(k), False, at)) is not None}
        ledger.set_pin_marks(unpins)
        store.delete(project, gone)
        changed = [i for i in gone if i in held]
    else:
        pinned = action is CurationAction.PIN
        pins = ledger.pin_marks(keys)
        moved: dict[Key, PinMark] = {k: m for k in keys if (m := after_pin(pins.get(k), pinned, at)) is not None}
        ledger.set_pin_marks(moved)
        ids_moved = [i for (_, i) in moved]
        store.set_pinned(project, ids_moved, pinned)
        changed = [i for i in ids_moved if i in held]
    return Curated(action, project, tuple(changed), tuple(i for i in wanted if i not in held))


def admit_items(
    ledger: CurationLedger, items: Sequence[MemoryItem], at: datetime, *, allow_forgotten: bool
) -> tuple[list[MemoryItem], list[tuple[MemoryItem, str]]]:
    """The items of an upsert made at ``at`` that may be written, and the forgotten ones refused with the reason
    (an explicit re-add, ``allow_forgotten``, after the forget writes it and is remembered)."""
    marks = ledger.forget_marks((i.project, i.id) for i in items)
    admitted: list[MemoryItem] = []
    refused: list[tuple[MemoryItem, str]] = []
    updates: dict[Key, ForgetMark] = {}
    for item in items:
        key = (item.project, item.id)
        decision = admit(updates.get(key) or marks.get(key), at, allow_forgotten=allow_forgotten)
        if decision.mark is not None:
            updates[key] = decision.mark
        if decision.admitted:
            admitted.append(item)
        else:
            refused.append((item, decision.reason or "forgotten"))
    if updates:
        ledger.set_forget_marks(updates)
    return admitted, refused


class MemoryCurationHandler:
    """The store owner's consumer of ``memory.curated``: applies it (nothing is published)."""

    def __init__(self, store: VectorStore, ledger: CurationLedger) -> None:
        self._store = store
        self._ledger = ledger

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        payload = event.payload
        if not isinstance(payload, MemoryCurated):
            raise PoisonEvent(f"the curation consumer takes memory.curated events, not {event.event_type}")
        if event.project == GLOBAL_PROJECT and not global_scope.marked(RECORD_HEADERS.get()):
            raise PoisonEvent(f"rejected: curating {GLOBAL_PROJECT!r} needs {global_scope.BUS_MARKER}")
        try:
            done = await asyncio.to_thread(
                apply_curation,
                self._store,
                self._ledger,
                event.project,
                payload.action,
                payload.ids,
                event.emitted_at,
            )
        except (OSError, TimeoutError) as exc:
            raise RetriableError(f"vector store unavailable: {exc}") from exc
        log.info(
            "memory_curated",
            project=event.project,
            action=done.action.value,
            changed=list(done.changed),
            missing=list(done.missing),
        )
        return ()
