"""What replay reads records into: the raw record, one compact fact per event kind, and the decoding counts.

``ctxbus.replay.decode`` makes them (schemas/ and fastavro only); ``join`` and ``report`` use them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

REQUESTED = "context.retrieval.requested"
COMPLETED = "context.retrieval.completed"
INJECTED = "context.injected"
OUTCOME = "context.outcome.recorded"

#: Why a record was skipped, in report order.
SKIP_REASONS = (
    "tombstone",
    "bad_framing",
    "unknown_schema_id",
    "undecodable",
    "unexpected_event_type",
    "envelope_mismatch",
    "not_a_dead_letter",
)


class RawRecord(NamedTuple):
    """One Kafka record as the reader hands it over (headers only for the dead-letter topic)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class RequestedFact(NamedTuple):
    event_id: str
    correlation_id: str
    session_id: str
    project: str
    emitted_us: int
    schema_id: int
    agent_name: str
    agent_role: str
    trigger: str
    task_type: str | None
    task_id: str | None
    domain: str | None
    max_tokens: int
    max_items: int


class CompletedFact(NamedTuple):
    event_id: str
    correlation_id: str
    session_id: str
    project: str
    emitted_us: int
    schema_id: int
    request_emitted_us: int
    agent_name: str
    agent_role: str
    trigger: str
    task_id: str | None
    domain: str | None
    profile: str
    task_type: str | None
    fingerprint: str | None
    candidates: int
    retrieval_ms: float
    empty_reason: str | None
    item_ids: tuple[str, ...]
    #: which of ``item_ids`` are global-scope items (the others are the envelope project's)
    global_item_ids: tuple[str, ...] = ()


class InjectedFact(NamedTuple):
    event_id: str
    correlation_id: str
    session_id: str
    project: str
    emitted_us: int
    schema_id: int
    request_emitted_us: int | None
    agent_name: str
    agent_role: str
    trigger: str
    context_source: str
    item_ids: tuple[str, ...]
    token_estimate: int
    context_chars: int
    context_bytes: int
    truncated: bool
    empty_reason: str | None
    assembly_ms: float
    retrieval_ms: float
    task_id: str | None = None
    #: which of ``item_ids`` are global-scope items (the others are the envelope project's)
    global_item_ids: tuple[str, ...] = ()
    #: the fingerprint of the context as injected (schema v4 on; None before)
    fingerprint: str | None = None


class OutcomeFact(NamedTuple):
    event_id: str
    correlation_id: str
    session_id: str
    project: str
    emitted_us: int
    schema_id: int
    scope: str
    task_id: str | None
    outcome: str
    source: str


class DeadLetterFact(NamedTuple):
    partition: int
    offset: int
    timestamp_ms: int
    original_topic: str
    original_partition: int
    original_offset: int
    consumer_group: str
    error_class: str
    reason: str
    error_message: str
    attempts: int
    #: what the dead-lettered bytes are, when they are a ctxbus event (else None)
    event_type: str | None
    correlation_id: str | None


Fact = RequestedFact | CompletedFact | InjectedFact | OutcomeFact | DeadLetterFact


@dataclass(slots=True)
class DecodeStats:
    """Counts over the records of one or more batches (merge with ``+=``)."""

    records: int = 0
    decoded: int = 0
    #: (topic, reason) -> records skipped
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: (event type, schema version) -> events decoded
    versions: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: topic -> records read
    by_topic: Counter[str] = field(default_factory=Counter)

    def __iadd__(self, other: DecodeStats) -> DecodeStats:
        self.records += other.records
        self.decoded += other.decoded
        self.skipped.update(other.skipped)
        self.versions.update(other.versions)
        self.by_topic.update(other.by_topic)
        return self

    def skipped_by_reason(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, reason), n in self.skipped.items():
            out[reason] += n
        return {r: out[r] for r in (*SKIP_REASONS, *sorted(set(out) - set(SKIP_REASONS))) if out[r]}
