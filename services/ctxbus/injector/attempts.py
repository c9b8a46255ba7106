"""The injector's attempt recorder (consumes attempt events into the attempt store), its task closer
(consumes task outcomes: a task that ended gives no more pre-context) and the policy that turns
settings into pre-context (pure glue; the builders are ``core.precontext``)."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.handling import Output, PoisonEvent
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import AttemptRecorded, OutcomeRecorded, OutcomeScope, Trigger
from ctxbus.core.precontext import PreContextPolicy, PreContextType, task_end_state
from ctxbus.settings import PreContextSettings

log = structlog.get_logger("ctxbus.attempts")

#: request triggers that get a pre-context, and of which kind
PRECONTEXT_TRIGGERS: dict[Trigger, PreContextType] = {
    Trigger.FALLBACK: PreContextType.CIRCUIT_BREAKER,
    Trigger.RETRY: PreContextType.RETRY,
    Trigger.HELPER: PreContextType.HELPER,
}


def policy_from(settings: PreContextSettings) -> PreContextPolicy:
    return PreContextPolicy(
        enabled=settings.enabled,
        max_lines=settings.max_lines,
        types=frozenset(PreContextType(t) for t in settings.types.split(",") if t),
        helper_max_attempts=settings.helper_max_attempts,
        max_files=settings.max_files,
        max_tokens=settings.max_tokens,
    )


class AttemptRecorderHandler:
    def __init__(self, store: AttemptStore) -> None:
        self._store = store

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, AttemptRecorded):
            raise PoisonEvent(f"the attempt recorder takes attempt events, not {event.event_type}")
        self._store.add(event.project, event.payload, event.emitted_at.isoformat())
        log.info(
            "attempt_recorded",
            project=event.project,
            task_id=event.payload.task_id,
            attempt=event.payload.attempt_number,
        )
        return ()


class TaskOutcomeHandler:
    """Outcomes with scope ``task`` close the (project, task) in the attempt store; others are skipped."""

    def __init__(self, store: AttemptStore) -> None:
        self._store = store

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        payload = event.payload
        if not isinstance(payload, OutcomeRecorded):
            raise PoisonEvent(f"the task closer takes outcome events, not {event.event_type}")
        if payload.scope is not OutcomeScope.TASK or not payload.task_id:
            return ()
        outcome = payload.outcome.value
        self._store.close_task(event.project, payload.task_id, outcome, event.emitted_at.isoformat())
        log.info(
            "task_closed",
            project=event.project,
            task_id=payload.task_id,
            outcome=outcome,
            state=task_end_state(outcome),
        )
        return ()
