"""Recording an outcome by hand (``ctxbus outcome record``, ``Memory.record_outcome``).

Where it goes:

- **through the bus** when there is one: ``CTXBUS_KAFKA_BOOTSTRAP_SERVERS``, or the running stack's
  broker (``runtime.json``). The store's owner (the retriever's process) learns from it like from
  any outcome. A configured broker that cannot be reached is an error, never a silent local write:
  the learning state belongs to the process that owns the store;
- **applied here** otherwise: recorded in this data directory's learning ledger and applied at once
  to the store the caller opened (the stack is stopped, so the caller owns it). It counts for the
  injections that ledger knows: those the stack recorded while it ran, and ``Memory.prime(...,
  session_id=S)`` calls of this library.

Either way it is the same ``OutcomeRecorded`` event, counted once per injected item (by event id).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.contract.envelope import MAX_PROJECT_CHARS, Envelope
from ctxbus.contract.payloads import Outcome, OutcomeRecorded, OutcomeScope
from ctxbus.contract.topics import Topics
from ctxbus.learning.handler import apply, outcome_fact
from ctxbus.ports import VectorStore
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

#: what a caller may record; ``unknown`` is what the hooks publish when nothing tells
RECORDABLE = (Outcome.SUCCESSFUL.value, Outcome.PARTIAL.value, Outcome.FAILED.value)
MAX_ID_CHARS = 500
MAX_NOTES_CHARS = 10_000
MAX_SOURCE_CHARS = 200
#: seconds to reach the broker and have the event acknowledged
PUBLISH_TIMEOUT_S = 15.0


class OutcomeError(ValueError):
    """An outcome that cannot be recorded: bad input, or a configured broker out of reach."""


@dataclass(frozen=True, slots=True)
class OutcomeReceipt:
    event_id: str
    project: str
    scope: str
    session_id: str | None
    task_id: str | None
    outcome: str
    #: "bus" (published; the store's owner applies it) or "local" (applied here)
    via: str
    #: local only: the items the outcome counts for, and the stored items whose feedback changed
    items_counted: int | None = None
    items_updated: int | None = None


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise OutcomeError(f"{name} is empty or blank")
    if len(value) > limit:
        raise OutcomeError(f"{name} is {len(value)} characters long; at most {limit}")
    return value


def outcome_event(
    project: str,
    outcome: str | Outcome,
    *,
    session_id: str | None = None,
    task_id: str | None = None,
    notes: str | None = None,
    source: str = "api",
) -> Envelope[OutcomeRecorded]:
    """The event for an outcome of a session or a task (exactly one of them), checked."""
    _text("the project", project, MAX_PROJECT_CHARS)
    if (session_id is None) == (task_id is None):
        raise OutcomeError("give exactly one of a session id and a task id")
    value = outcome.value if isinstance(outcome, Outcome) else outcome
    if value not in RECORDABLE:
        raise OutcomeError(f"unknown outcome {outcome!r}; valid: {', '.join(RECORDABLE)}")
    scope_id = _text("the session id" if session_id is not None else "the task id", session_id or task_id, MAX_ID_CHARS)
    if notes is not None and len(notes) > MAX_NOTES_CHARS:
        raise OutcomeError(f"the notes are {len(notes)} characters long; at most {MAX_NOTES_CHARS}")
    _text("the source", source, MAX_SOURCE_CHARS)
    payload = OutcomeRecorded(
        scope=OutcomeScope.SESSION if session_id is not None else OutcomeScope.TASK,
        task_id=task_id,
        outcome=Outcome(value),
        notes=notes or None,
        source=source,
    )
    # a task's outcome travels in the task's own entity (its session id is the task id, as attempts do)
    return Envelope.root(payload, project=project, session_id=scope_id, producer=source)


def bus_of(settings: Settings) -> KafkaClientConfig | None:
    """The broker to publish to, or None when there is none (no cluster configured, no stack running)."""
    try:
        return kafka_config(settings)
    except NoBroker:
        return None


async def publish(config: KafkaClientConfig, topics: Topics, event: Envelope[OutcomeRecorded], client_id: str) -> None:
    publisher = EventPublisher(config, client_id)
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_S):
            try:
                await publisher.start()
                await publisher.publish(topics.outcome_recorded, event)
            finally:
                await publisher.stop()  # also after a failed start: no producer left open
    except TimeoutError as exc:
        raise OutcomeError(
            f"the broker at {config.bootstrap_servers} did not acknowledge within {PUBLISH_TIMEOUT_S:.0f} s"
        ) from exc
    except Exception as exc:  # aiokafka's connection errors: the caller gets one clear line
        raise OutcomeError(f"cannot publish to the broker at {config.bootstrap_servers}: {exc}") from exc


def apply_locally(settings: Settings, store: VectorStore, event: Envelope[OutcomeRecorded]) -> tuple[int, int]:
    """Record the outcome in the data directory's ledger and apply it to ``store``: (items counted, updated)."""
    ledger = LearningLedger(settings.learning_db)
    try:
        keys = ledger.add_outcome(outcome_fact(event))
        return len(keys), apply(ledger, store, keys) if keys else 0
    finally:
        ledger.close()


def receipt(
    event: Envelope[OutcomeRecorded], via: str, counted: int | None = None, updated: int | None = None
) -> OutcomeReceipt:
    payload = event.payload
    task = payload.scope is OutcomeScope.TASK
    return OutcomeReceipt(
        event_id=str(event.event_id),
        project=event.project,
        scope=payload.scope.value,
        session_id=None if task else event.session_id,
        task_id=payload.task_id,
        outcome=payload.outcome.value,
        via=via,
        items_counted=counted,
        items_updated=updated,
    )
