"""Learning: context injected + outcome recorded -> the injected items' feedback in the store.

Runs in the process that owns the store (the retriever's). Two consumer loops share one
:class:`~ctxbus.adapters.learning_ledger.LearningLedger`: every injection and every outcome is a
fact; after each new fact the counts of the items it touches are recomputed from all facts (see
:mod:`ctxbus.core.learning`) and written to the store, so the order the two topics arrive in does
not matter and replaying them from the start rebuilds the same feedback.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence

import structlog

from ctxbus.adapters.kafka.handling import Output, PoisonEvent, RetriableError
from ctxbus.adapters.learning_ledger import Key, LearningLedger
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import ContextInjected, OutcomeRecorded
from ctxbus.core.learning import InjectionFact, OutcomeFact
from ctxbus.memory.model import GLOBAL_PROJECT, Feedback
from ctxbus.ports import VectorStore

log = structlog.get_logger("ctxbus.learning")


def injection_fact(event: AnyEnvelope) -> InjectionFact:
    payload = event.payload
    if not isinstance(payload, ContextInjected):
        raise PoisonEvent(f"learning takes context.injected here, not {event.event_type}")
    global_ids = set(payload.global_item_ids)
    return InjectionFact(
        event_id=str(event.event_id),
        project=event.project,
        session_id=event.session_id,
        task_id=payload.task_id,
        emitted_at=event.emitted_at,
        items=tuple((GLOBAL_PROJECT if i in global_ids else event.project, i) for i in payload.item_ids),
    )


def outcome_fact(event: AnyEnvelope) -> OutcomeFact:
    payload = event.payload
    if not isinstance(payload, OutcomeRecorded):
        raise PoisonEvent(f"learning takes context.outcome.recorded here, not {event.event_type}")
    return OutcomeFact(
        event_id=str(event.event_id),
        project=event.project,
        session_id=event.session_id,
        task_id=payload.task_id,
        scope=payload.scope.value,
        outcome=payload.outcome.value,
        emitted_at=event.emitted_at,
    )


def apply(ledger: LearningLedger, store: VectorStore, keys: set[Key]) -> int:
    """Write the current counts of ``keys`` to the store; returns how many stored items were updated. Counted and
    written under the ledger's ``publishing`` lock: another loop's counts, read later, are written later."""
    with ledger.publishing:
        by_project: dict[str, dict[str, Feedback]] = defaultdict(dict)
        for (project, item_id), feedback in ledger.counts(keys).items():
            by_project[project][item_id] = feedback
        return sum(store.set_feedback(project, items) for project, items in sorted(by_project.items()))


def relearn(ledger: LearningLedger, store: VectorStore) -> Callable[[set[Key]], int]:
    """For the memory loop: items just written get their current counts. Learning writes an item's counts only
    when a fact touches it, and an item not yet stored takes none; so a member that stores an item after the
    outcomes that count for it (its memory loop behind its learning loops) would keep it at zero."""
    return lambda keys: apply(ledger, store, keys)


class LearningHandler:
    """``injections`` and ``outcomes``: the two consumer loops' handlers."""

    def __init__(self, ledger: LearningLedger, store: VectorStore) -> None:
        self._ledger = ledger
        self._store = store

    async def injections(self, event: AnyEnvelope) -> Sequence[Output]:
        fact = injection_fact(event)
        if fact.items:
            await self._learn(fact)
        return ()

    async def outcomes(self, event: AnyEnvelope) -> Sequence[Output]:
        await self._learn(outcome_fact(event))
        return ()

    async def _learn(self, fact: InjectionFact | OutcomeFact) -> None:
        def work() -> tuple[int, int]:
            if isinstance(fact, InjectionFact):
                keys = self._ledger.add_injection(fact)
            else:
                keys = self._ledger.add_outcome(fact)
            return len(keys), apply(self._ledger, self._store, keys) if keys else 0

        try:
            touched, updated = await asyncio.to_thread(work)
        except (OSError, TimeoutError) as exc:
            raise RetriableError(f"vector store unavailable: {exc}") from exc
        if touched:
            log.info("learned", fact=type(fact).__name__, items=touched, updated=updated, project=fact.project)
