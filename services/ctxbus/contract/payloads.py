"""Payload models, mirroring ``schemas/ctxbus.payloads.*.avsc`` field for field.

Bounds live here (Avro has none): a decoded event that breaks them is poison.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from ctxbus.memory.model import MemoryItem

#: Longest prompt or task description accepted in a request, in characters.
MAX_PROMPT_CHARS = 100_000
#: Seed 002's bound on an injected context (50 KB).
MAX_CONTEXT_BYTES = 50_000
#: Seed 002's bound on the retrieval time carried in an injection event.
MAX_RETRIEVAL_MS = 10_000
#: Seed 002's bound on the number of patterns in one injection.
MAX_PATTERN_COUNT = 100


#: The sections of an assembled context (seed 001's include_* switches).
SECTIONS = ("principles", "patterns", "learnings", "warnings", "suggested_approach")


class CurationAction(StrEnum):
    """What a ``memory.curated`` event does to its items (the rules: :mod:`ctxbus.core.curation`)."""

    FORGET = "forget"
    PIN = "pin"
    UNPIN = "unpin"


class Trigger(StrEnum):
    USER_PROMPT = "user_prompt"
    SESSION_START = "session_start"
    GAP = "gap"
    RETRY = "retry"
    FALLBACK = "fallback"
    HELPER = "helper"


class TaskType(StrEnum):
    FEATURE = "feature"
    BUGFIX = "bugfix"
    REFACTOR = "refactor"
    REVIEW = "review"
    EXPLORE = "explore"
    GENERAL = "general"


class ContextSource(StrEnum):
    """Where injected context came from (seed 002)."""

    PERSISTENCE_FILE = "persistence_file"
    SESSION_AGGREGATOR = "session_aggregator"
    RAG_QUERY = "rag_query"
    FALLBACK_STATIC = "fallback_static"
    NONE = "none"


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RetrievalRequested(_Payload):
    agent_name: str = Field(min_length=1, max_length=200)
    agent_role: str = Field(default="implementer", min_length=1, max_length=100)
    domain: str | None = Field(default=None, max_length=200)
    task_type: TaskType | None = None
    prompt: str = Field(max_length=MAX_PROMPT_CHARS)
    mentioned_files: tuple[str, ...] = Field(default=(), max_length=200)
    max_tokens: int = Field(default=2_000, ge=1, le=100_000)
    max_chars: int = Field(default=10_000, ge=1, le=MAX_CONTEXT_BYTES)
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    max_items: int = Field(default=10, ge=1, le=MAX_PATTERN_COUNT)
    trigger: Trigger
    injection_target: str = Field(default="additional_context", min_length=1, max_length=200)
    task_id: str | None = Field(default=None, max_length=500)
    failed_provider: str | None = Field(default=None, max_length=100)
    failure_reason: str | None = Field(default=None, max_length=500)
    #: per-request profile overrides: field name -> JSON-encoded value (see core.profiles.OVERRIDABLE)
    profile_overrides: dict[str, str] = Field(default_factory=dict, max_length=50)
    #: seed 001's include_* switches by section (see SECTIONS); an absent section is included
    include: dict[str, bool] = Field(default_factory=dict, max_length=len(SECTIONS))
    #: also answer with seed 001's prime_context JSON document (``ContextInjected.prime``)
    prime: bool = False
    #: with ``domain``: only items of that domain are candidates (a soft boost otherwise)
    strict_domain: bool = False
    #: when the asker stops waiting: a request read after it is answered at once as expired
    deadline: AwareDatetime | None = None

    @field_validator("include")
    @classmethod
    def _known_sections(cls, value: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(set(value) - set(SECTIONS))
        if unknown:
            raise ValueError(f"unknown include section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
        return value

    def includes(self, section: str) -> bool:
        return self.include.get(section, True)


class RankedItem(_Payload):
    id: str = Field(min_length=1)
    project: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    title: str = ""
    content: str
    source: str = ""
    domains: tuple[str, ...] = ()
    confidence: float = Field(ge=0.0, le=1.0)
    success_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    usage_count: int = Field(default=0, ge=0)
    example_reference: str | None = None
    outcome: str | None = None
    score: float
    breakdown: dict[str, float] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    key_insight: str | None = None
    lesson_learned: str | None = None
    session_id: str | None = None
    severity: str | None = None
    mitigation: str | None = None
    #: the near-duplicate cluster the item belongs to (near copies stay separate items, linked by it)
    cluster_id: str | None = Field(default=None, max_length=200)
    #: near copies of this item (same cluster) left out of this context in its favour
    collapsed_ids: tuple[str, ...] = Field(default=(), max_length=MAX_PATTERN_COUNT * 10)


class RetrievalCompleted(_Payload):
    request: RetrievalRequested
    request_emitted_at: AwareDatetime
    items: tuple[RankedItem, ...] = Field(max_length=MAX_PATTERN_COUNT)
    candidates_considered: int = Field(default=0, ge=0)
    retrieval_duration_ms: float = Field(ge=0.0)
    embedding_model: str
    empty_reason: str | None = None
    profile: str = "implementer"
    task_type: TaskType | None = None
    task_type_confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    fingerprint: str | None = None
    fingerprint_components: dict[str, str] = Field(default_factory=dict)
    notices: tuple[str, ...] = ()
    #: the domain the ranking used (the request's, or one detected from the prompt and files)
    domain: str | None = Field(default=None, max_length=200)
    #: where ``domain`` came from: ``request`` or ``detected`` (None: no domain)
    domain_source: str | None = Field(default=None, max_length=50)


class ContextInjected(_Payload):
    # seed 002's ModelHookContextInjectedPayload, with its bounds
    context_source: ContextSource
    pattern_count: int = Field(ge=0, le=MAX_PATTERN_COUNT)
    context_size_bytes: int = Field(ge=0, le=MAX_CONTEXT_BYTES)
    agent_domain: str | None = None
    min_confidence_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    retrieval_duration_ms: int = Field(ge=0, le=MAX_RETRIEVAL_MS)
    # ctxbus's additions
    agent_name: str = Field(min_length=1)
    agent_role: str = "implementer"
    trigger: Trigger
    context: str
    context_chars: int = Field(ge=0)
    token_estimate: int = Field(ge=0)
    item_ids: tuple[str, ...] = ()
    injection_target: str = "additional_context"
    truncated: bool = False
    empty_reason: str | None = None
    assembly_duration_ms: float = Field(default=0.0, ge=0.0)
    request_emitted_at: AwareDatetime | None = None
    suggested_approach: str = ""
    #: seed 001's prime_context JSON document, when the request asked for it
    prime: str | None = None
    task_id: str | None = Field(default=None, max_length=500)
    #: which of ``item_ids`` are items of the global scope (the others are the event's project's)
    global_item_ids: tuple[str, ...] = ()
    #: seed 004's fingerprint of this context as injected (its items, tokens, compression, tags); v4
    fingerprint: str | None = None
    #: its components, JSON-encoded (as ``RetrievalCompleted.fingerprint_components``)
    fingerprint_components: dict[str, str] = Field(default_factory=dict)


class OutcomeScope(StrEnum):
    SESSION = "session"
    TASK = "task"


class Outcome(StrEnum):
    SUCCESSFUL = "successful"
    PARTIAL = "partial"
    FAILED = "failed"
    UNKNOWN = "unknown"


class OutcomeRecorded(_Payload):
    scope: OutcomeScope = OutcomeScope.SESSION
    task_id: str | None = Field(default=None, max_length=500)
    outcome: Outcome = Outcome.UNKNOWN
    notes: str | None = Field(default=None, max_length=10_000)
    source: str = Field(min_length=1, max_length=200)


class AttemptStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"


class AttemptRecorded(_Payload):
    task_id: str = Field(min_length=1, max_length=500)
    attempt_number: int = Field(ge=1, le=10_000)
    provider: str = Field(min_length=1, max_length=100)
    files_created: tuple[str, ...] = Field(default=(), max_length=1_000)
    files_updated: tuple[str, ...] = Field(default=(), max_length=1_000)
    status: AttemptStatus
    validation_errors: tuple[str, ...] = Field(default=(), max_length=200)
    exit_reason: str | None = Field(default=None, max_length=200)
    enable_pre_context: bool | None = None


#: Most memory items in one upsert event (bigger imports are split into several events).
MAX_ITEMS_PER_UPSERT = 500


class MemoryUpserted(_Payload):
    """Memory items to add or replace; each is a ``MemoryItem`` (the Avro ``MemoryRecord``)."""

    items: tuple[MemoryItem, ...] = Field(min_length=1, max_length=MAX_ITEMS_PER_UPSERT)


class MemoryAction(StrEnum):
    """What the store's owner did with one incoming memory item."""

    ADDED = "added"
    REPLACED = "replaced"
    MERGED = "merged"
    REJECTED = "rejected"


class MemoryStoreResult(_Payload):
    id: str = Field(min_length=1)
    project: str = Field(min_length=1)
    action: MemoryAction = MemoryAction.ADDED
    #: merged: the id of the existing item it was merged into
    into: str | None = None
    #: the near-duplicate cluster the item joined
    cluster_id: str | None = None
    reason: str | None = Field(default=None, max_length=2_000)


class MemoryStored(_Payload):
    """The answer to a ``MemoryUpserted`` event (its causation id): its items are searchable now."""

    results: tuple[MemoryStoreResult, ...] = Field(max_length=MAX_ITEMS_PER_UPSERT)
    #: ids newly marked superseded by these items
    superseded: tuple[str, ...] = ()


class MemoryCurated(_Payload):
    """A person forgot, pinned or unpinned items of the envelope's project (see ctxbus.core.curation)."""

    action: CurationAction = CurationAction.FORGET
    ids: tuple[str, ...] = Field(min_length=1, max_length=MAX_ITEMS_PER_UPSERT)
    note: str | None = Field(default=None, max_length=2_000)

    @field_validator("ids")
    @classmethod
    def _ids_not_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not i.strip() or len(i) > 200 for i in value):
            raise ValueError("every id must be 1 to 200 characters and not blank")
        return value


class DeadLetter(_Payload):
    """Why a message was dead-lettered (not an envelope event: it rides in a header)."""

    original_topic: str
    original_partition: int
    original_offset: int
    original_timestamp_ms: int | None = None
    consumer_group: str
    error_class: str
    error_message: str
    attempts: int = Field(default=1, ge=1)
    failed_at: datetime
