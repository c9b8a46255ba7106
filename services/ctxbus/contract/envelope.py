"""The envelope every event travels in, and the event types it can hold.

An event is ``Envelope[P]``: the ids that trace it (event, entity, session,
correlation, causation), when and by whom it was emitted, the tenant
``project``, and a typed payload ``P``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Generic, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from ctxbus import __version__
from ctxbus.contract.payloads import (
    AttemptRecorded,
    ContextInjected,
    MemoryCurated,
    MemoryStored,
    MemoryUpserted,
    OutcomeRecorded,
    RetrievalCompleted,
    RetrievalRequested,
)

P = TypeVar(
    "P",
    RetrievalRequested,
    RetrievalCompleted,
    ContextInjected,
    OutcomeRecorded,
    AttemptRecorded,
    MemoryUpserted,
    MemoryStored,
    MemoryCurated,
)

#: Namespace for ids derived from other ids (entity ids, output event ids).
#: longest project id an event carries (longer ones are shortened with a hash by whoever names the project)
MAX_PROJECT_CHARS = 200
_DERIVED_NAMESPACE = uuid.UUID("0d6f5a7e-8b0e-4f0e-9d57-61c3f1f4a2b9")


class Producer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    service: str = Field(min_length=1, max_length=100)
    version: str = Field(default=__version__, min_length=1, max_length=50)


class EventType:
    RETRIEVAL_REQUESTED = "context.retrieval.requested"
    RETRIEVAL_COMPLETED = "context.retrieval.completed"
    CONTEXT_INJECTED = "context.injected"
    OUTCOME_RECORDED = "context.outcome.recorded"
    ATTEMPT_RECORDED = "agent.attempt.recorded"
    MEMORY_UPSERTED = "memory.upserted"
    MEMORY_STORED = "memory.stored"
    MEMORY_CURATED = "memory.curated"


#: event type -> payload model
PAYLOAD_TYPES: dict[str, type[BaseModel]] = {
    EventType.RETRIEVAL_REQUESTED: RetrievalRequested,
    EventType.RETRIEVAL_COMPLETED: RetrievalCompleted,
    EventType.CONTEXT_INJECTED: ContextInjected,
    EventType.OUTCOME_RECORDED: OutcomeRecorded,
    EventType.ATTEMPT_RECORDED: AttemptRecorded,
    EventType.MEMORY_UPSERTED: MemoryUpserted,
    EventType.MEMORY_STORED: MemoryStored,
    EventType.MEMORY_CURATED: MemoryCurated,
}
_EVENT_TYPE_OF: dict[type[BaseModel], str] = {v: k for k, v in PAYLOAD_TYPES.items()}
#: event type -> the schema version this code writes (checked against schemas/registry.json)
CURRENT_SCHEMA_VERSION: dict[str, int] = {
    EventType.RETRIEVAL_REQUESTED: 3,
    EventType.RETRIEVAL_COMPLETED: 3,
    EventType.CONTEXT_INJECTED: 4,
    EventType.OUTCOME_RECORDED: 1,
    EventType.ATTEMPT_RECORDED: 2,
    EventType.MEMORY_UPSERTED: 3,
    EventType.MEMORY_STORED: 1,
    EventType.MEMORY_CURATED: 1,
}


def event_type_of(payload: BaseModel) -> str:
    return _EVENT_TYPE_OF[type(payload)]


def entity_id_for(project: str, session_id: str) -> uuid.UUID:
    """The partition key of a session: stable for a (project, session) pair."""
    return uuid.uuid5(_DERIVED_NAMESPACE, f"entity\x1f{project}\x1f{session_id}")


def derived_event_id(cause: uuid.UUID, stage: str) -> uuid.UUID:
    """Deterministic id of the event a stage emits for a cause: redelivery gives the same id."""
    return uuid.uuid5(_DERIVED_NAMESPACE, f"{stage}\x1f{cause}")


class Envelope(BaseModel, Generic[P]):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: uuid.UUID
    event_type: str
    schema_version: int = Field(ge=1)
    entity_id: uuid.UUID
    session_id: str = Field(min_length=1, max_length=500)
    correlation_id: uuid.UUID
    causation_id: uuid.UUID
    emitted_at: AwareDatetime
    producer: Producer
    project: str = Field(min_length=1, max_length=MAX_PROJECT_CHARS)
    payload: P

    @field_validator("emitted_at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @classmethod
    def root(
        cls,
        payload: P,
        *,
        project: str,
        session_id: str,
        producer: str,
        now: datetime | None = None,
        event_id: uuid.UUID | None = None,
        correlation_id: uuid.UUID | None = None,
    ) -> Envelope[P]:
        """A first event of a chain: its causation id is its own id."""
        eid = event_id or uuid.uuid4()
        return cls(
            event_id=eid,
            event_type=_EVENT_TYPE_OF[type(payload)],
            schema_version=CURRENT_SCHEMA_VERSION[_EVENT_TYPE_OF[type(payload)]],
            entity_id=entity_id_for(project, session_id),
            session_id=session_id,
            correlation_id=correlation_id or eid,
            causation_id=eid,
            emitted_at=now or datetime.now(UTC),
            producer=Producer(service=producer),
            project=project,
            payload=payload,
        )

    def caused(self, payload: P2, *, producer: str, now: datetime | None = None) -> Envelope[P2]:
        """The event this one causes: same entity, session, project and correlation;
        causation = this event's id; a deterministic event id (same cause, same stage,
        same id), so a redelivered input yields the same output id."""
        event_type = _EVENT_TYPE_OF[type(payload)]
        return Envelope(
            event_id=derived_event_id(self.event_id, event_type),
            event_type=event_type,
            schema_version=CURRENT_SCHEMA_VERSION[event_type],
            entity_id=self.entity_id,
            session_id=self.session_id,
            correlation_id=self.correlation_id,
            causation_id=self.event_id,
            emitted_at=now or datetime.now(UTC),
            producer=Producer(service=producer),
            project=self.project,
            payload=payload,
        )


P2 = TypeVar(
    "P2",
    RetrievalRequested,
    RetrievalCompleted,
    ContextInjected,
    OutcomeRecorded,
    AttemptRecorded,
    MemoryUpserted,
    MemoryStored,
    MemoryCurated,
)

AnyEnvelope = (
    Envelope[RetrievalRequested]
    | Envelope[RetrievalCompleted]
    | Envelope[ContextInjected]
    | Envelope[OutcomeRecorded]
    | Envelope[AttemptRecorded]
    | Envelope[MemoryUpserted]
    | Envelope[MemoryStored]
    | Envelope[MemoryCurated]
)
