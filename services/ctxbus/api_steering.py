"""The Python API's steering half: outcomes, and memory you can see and steer (list, get, forget, pin, unpin).

:class:`Steering` is a base of :class:`ctxbus.api.Memory` (kept apart so each module stays small); it uses the
Memory's settings, store and event loop.

::

    with Memory.open() as memory:
        for item in memory.list("payments", kind="warning"):
            print(item.id, item.title)
        print(memory.get("w-1", project="payments")["last_injected"])
        memory.pin("w-1", project="payments")          # a fixed ranking boost; never lowered by learning
        memory.forget(["old-1"], project="payments")   # deleted, and never written again by an upsert

Forgetting and pinning go through the bus when there is one (a configured broker or the running stack: the
store's owner applies them, and a restart or a replay keeps them), else they are applied to this store at once.
A forgotten item comes back only through ``add(..., allow_forgotten=True)`` (``ctxbus memory import
--allow-forgotten``) made after the forget. See docs/memory.md.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, CurationAction
from ctxbus.contract.topics import Topics
from ctxbus.core.listing import ItemFilter, ItemHistory, UnknownItem, document, row, select, session_change
from ctxbus.learning.record import OutcomeReceipt
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import VectorStore
from ctxbus.settings import Settings

PRODUCER = "api"
T = TypeVar("T")

__all__ = ["CurationReceipt", "ForgottenRefused", "Steering", "UnknownItem"]


class ForgottenRefused(ValueError):
    """Items that were forgotten, added again without ``allow_forgotten=True``."""


@dataclass(frozen=True, slots=True)
class CurationReceipt:
    event_id: str
    project: str
    action: str
    ids: tuple[str, ...]
    #: "bus" (published; the store's owner applies it) or "local" (applied here)
    via: str
    #: local only: the ids the store changed (deleted, pinned, unpinned)
    changed: tuple[str, ...] | None = None


class Steering:
    settings: Settings
    store: VectorStore

    def _sync(self, work: Coroutine[Any, Any, T]) -> T:
        raise NotImplementedError  # Memory's own loop

    # -- seeing ---------------------------------------------------------------------------------------------

    def list(
        self,
        project: str | None = None,
        *,
        kind: str | None = None,
        source: str | None = None,
        stale: bool = False,
        pinned: bool | None = None,
    ) -> builtins.list[MemoryItem]:
        """The items of ``project`` (every project when None), by project and id: live ones, or only the stale
        (superseded) ones with ``stale=True``; ``kind``, ``source`` (a substring), ``pinned`` filter further."""
        keep = ItemFilter(kind=kind, source=source, stale=stale, pinned=pinned)
        return select(self.store.items(project), keep)

    def rows(self, project: str | None = None, **filters: Any) -> builtins.list[dict[str, Any]]:
        """:meth:`list` as JSON-ready rows (id, kind, source, learned conviction, uses, outcomes, injections and the
        last one, pinned, stale, title)."""
        from ctxbus.adapters.learning_ledger import LearningLedger  # noqa: PLC0415

        ledger = LearningLedger(self.settings.learning_db)
        try:
            seen = ledger.injection_summary(project)
        finally:
            ledger.close()
        items = self.list(project, **filters)
        return [row(i, ItemHistory(*seen.get((i.project, i.id), (0, None)))) for i in items]

    def sessions(self, project: str | None = None, *, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """The latest outcomes (newest first) and what each changed: the conviction of every item it counted for,
        before and after it (:func:`ctxbus.core.listing.session_change`)."""
        from ctxbus.adapters.learning_ledger import LearningLedger  # noqa: PLC0415

        ledger = LearningLedger(self.settings.learning_db)
        try:
            outcomes = ledger.recent_outcomes(project, limit)
        finally:
            ledger.close()
        changes = []
        for fact, keys in outcomes:
            items = [
                i for p in sorted({p for p, _ in keys}) for i in self.store.get(p, sorted(i for q, i in keys if q == p))
            ]
            changes.append(
                session_change(fact.project, fact.session_id, fact.task_id, fact.outcome, fact.emitted_at, items)
            )
        return changes

    async def asessions(self, project: str | None = None, *, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """:meth:`sessions` for callers that already run an event loop (the gateway)."""
        return await asyncio.to_thread(self.sessions, project, limit=limit)

    def get(self, item_id: str, *, project: str) -> dict[str, Any]:
        """The whole item and what learning knows of it: learned conviction and success rate, outcomes, uses,
        injections and the last one, near copies. Raises :class:`~ctxbus.core.listing.UnknownItem`."""
        from ctxbus.adapters.learning_ledger import LearningLedger  # noqa: PLC0415

        found = self.store.get(project, [item_id])
        if not found:
            raise UnknownItem(project, item_id)
        item = found[0]
        near = [i for i in self.store.items(project) if i.cluster == item.cluster] if item.cluster_id else []
        ledger = LearningLedger(self.settings.learning_db)
        try:
            history = ItemHistory(*ledger.injections_of((item.project, item.id)))
        finally:
            ledger.close()
        return document(item, history, near)

    async def alist_rows(self, project: str | None = None, **filters: Any) -> builtins.list[dict[str, Any]]:
        """:meth:`rows` for callers that already run an event loop (the gateway)."""
        return await asyncio.to_thread(self.rows, project, **filters)

    async def aget(self, item_id: str, *, project: str) -> dict[str, Any]:
        """:meth:`get` for callers that already run an event loop (the gateway)."""
        return await asyncio.to_thread(self.get, item_id, project=project)

    # -- steering -------------------------------------------------------------------------------------------

    def forget(self, ids: Sequence[str], *, project: str, note: str | None = None) -> CurationReceipt:
        """Forget items: deleted from the store and never written again by an upsert (a re-import, a replay),
        unless added again with ``allow_forgotten=True``."""
        return self._sync(self.acurate(project, CurationAction.FORGET, ids, note=note))

    def pin(self, item_id: str, *, project: str, note: str | None = None) -> CurationReceipt:
        """Pin an item: a fixed ranking boost, never lowered by learning (ctxbus.core.ranking)."""
        return self._sync(self.acurate(project, CurationAction.PIN, [item_id], note=note))

    def unpin(self, item_id: str, *, project: str, note: str | None = None) -> CurationReceipt:
        return self._sync(self.acurate(project, CurationAction.UNPIN, [item_id], note=note))

    async def acurate(
        self,
        project: str,
        action: CurationAction | str,
        ids: Sequence[str],
        *,
        note: str | None = None,
        source: str = PRODUCER,
    ) -> CurationReceipt:
        """:meth:`forget`, :meth:`pin`, :meth:`unpin` for callers that already run an event loop. Raises
        :class:`~ctxbus.retriever.curation_record.CurationError` for bad input or a broker out of reach."""
        from ctxbus.learning import record  # noqa: PLC0415
        from ctxbus.retriever import curation_record  # noqa: PLC0415

        event = curation_record.curation_event(project, action, ids, note=note, source=source)
        receipt = CurationReceipt(
            str(event.event_id), event.project, event.payload.action.value, event.payload.ids, "bus"
        )
        config = record.bus_of(self.settings)
        if config is not None:
            await curation_record.publish(config, Topics(self.settings.topic_prefix), event, PRODUCER)
            return receipt
        done = await asyncio.to_thread(curation_record.apply_locally, self.settings, self.store, event)
        return CurationReceipt(receipt.event_id, receipt.project, receipt.action, receipt.ids, "local", done.changed)

    def check_forgotten(self, items: Sequence[MemoryItem], allow_forgotten: bool) -> None:
        """Raise :class:`ForgottenRefused` (naming them) when ``items`` hold forgotten ones an import may not
        bring back; with ``allow_forgotten`` an explicit re-add is remembered."""
        from ctxbus.retriever.curation_record import admit_locally  # noqa: PLC0415

        _, refused = admit_locally(self.settings, items, datetime.now(UTC), allow_forgotten=allow_forgotten)
        if refused:
            named = "; ".join(f"{i.id} ({i.project}): {why}" for i, why in refused[:10])
            raise ForgottenRefused(f"{len(refused)} forgotten item(s) not added again: {named}")

    # -- outcomes -------------------------------------------------------------------------------------------

    def record_outcome(
        self,
        project: str,
        outcome: str,
        *,
        session_id: str | None = None,
        task_id: str | None = None,
        notes: str | None = None,
        source: str = PRODUCER,
    ) -> OutcomeReceipt:
        """Record how a session or a task (exactly one) went: ``successful``, ``partial`` or ``failed``.

        Published on ``ctxbus.context.outcome.recorded.v1`` when there is a broker (a configured cluster or
        the running stack; the store's owner learns from it); else recorded in this data directory's
        learning ledger and applied to this store at once (``via="local"``, with the counts). Raises
        :class:`~ctxbus.learning.record.OutcomeError` for bad input or a configured broker out of reach."""
        return self._sync(
            self.arecord_outcome(project, outcome, session_id=session_id, task_id=task_id, notes=notes, source=source)
        )

    async def arecord_outcome(
        self,
        project: str,
        outcome: str,
        *,
        session_id: str | None = None,
        task_id: str | None = None,
        notes: str | None = None,
        source: str = PRODUCER,
    ) -> OutcomeReceipt:
        """:meth:`record_outcome` for callers that already run an event loop."""
        from ctxbus.learning import record  # noqa: PLC0415

        event = record.outcome_event(
            project, outcome, session_id=session_id, task_id=task_id, notes=notes, source=source
        )
        config = record.bus_of(self.settings)
        if config is not None:
            await record.publish(config, Topics(self.settings.topic_prefix), event, PRODUCER)
            return record.receipt(event, "bus")
        counted, updated = await asyncio.to_thread(record.apply_locally, self.settings, self.store, event)
        return record.receipt(event, "local", counted, updated)

    def _note_injection(self, event: Envelope[ContextInjected]) -> None:
        """An injection this library made, in the data directory's learning ledger (outcomes count for it)."""
        from ctxbus.adapters.learning_ledger import LearningLedger  # noqa: PLC0415
        from ctxbus.learning.handler import injection_fact  # noqa: PLC0415

        fact = injection_fact(event)
        if not fact.items:
            return
        ledger = LearningLedger(self.settings.learning_db)
        try:
            ledger.add_injection(fact)
        finally:
            ledger.close()
