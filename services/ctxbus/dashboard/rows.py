"""What the dashboard keeps of each event: one bounded row per injection, dead letter or skipped message.

Pure: rows are built from decoded contract events (no Kafka, no I/O).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, DeadLetter
from ctxbus.dashboard.series import rounded

#: Longest error message or detail kept in a row, in characters.
MAX_MESSAGE_CHARS = 300
_REASON_SLUG = re.compile(r"^([a-z][a-z0-9_]{1,40}): ")

# ---------------------------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class InjectionRow:
    """One context-injected event, reduced to what the page shows."""

    event_id: str
    correlation_id: str
    at: float  # the injection's emitted_at, epoch seconds
    received_at: float  # when the dashboard consumed it, epoch seconds
    project: str
    session: str
    agent: str
    trigger: str
    items: int
    chars: int
    size_bytes: int
    tokens: int
    truncated: bool
    empty_reason: str | None
    source: str
    e2e_ms: float | None
    retrieval_ms: float
    assembly_ms: float
    #: read from history when the dashboard started (not seen live): its delay to the dashboard means nothing
    backlog: bool = False

    @property
    def empty(self) -> bool:
        """No context at all (a pre-context without memory items is not empty)."""
        return self.chars == 0

    def stage_ms(self) -> dict[str, float]:
        """Each latency stage this event measures (end-to-end and transit need the request's time)."""
        stages = {"retrieval": self.retrieval_ms, "assembly": self.assembly_ms}
        if not self.backlog:
            stages["delivery"] = max(0.0, (self.received_at - self.at) * 1000.0)
        if self.e2e_ms is not None:
            stages["end_to_end"] = self.e2e_ms
            stages["transit"] = max(0.0, self.e2e_ms - self.retrieval_ms - self.assembly_ms)
        return stages

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.event_id,
            "correlation_id": self.correlation_id,
            "at": self.at,
            "project": self.project,
            "session": self.session,
            "agent": self.agent,
            "trigger": self.trigger,
            "items": self.items,
            "chars": self.chars,
            "bytes": self.size_bytes,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "empty_reason": self.empty_reason,
            "source": self.source,
            "e2e_ms": rounded(self.e2e_ms),
            "retrieval_ms": rounded(self.retrieval_ms),
            "assembly_ms": rounded(self.assembly_ms),
            "backlog": self.backlog,
        }


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    at: float  # failed_at, epoch seconds
    project: str | None  # from the original event, when it still decodes
    original_topic: str
    original_partition: int
    original_offset: int
    consumer_group: str
    reason: str
    error_class: str
    error_message: str
    attempts: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "project": self.project,
            "topic": self.original_topic,
            "partition": self.original_partition,
            "offset": self.original_offset,
            "group": self.consumer_group,
            "reason": self.reason,
            "error_class": self.error_class,
            "message": self.error_message,
            "attempts": self.attempts,
        }


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A message the dashboard could not decode (it is counted and shown, never fatal)."""

    at: float
    topic: str
    partition: int
    offset: int
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "reason": self.reason,
            "detail": self.detail,
        }


def injection_row(event: Envelope[ContextInjected], received_at: float, *, backlog: bool = False) -> InjectionRow:
    p = event.payload
    e2e = None
    if p.request_emitted_at is not None:
        e2e = (event.emitted_at - p.request_emitted_at).total_seconds() * 1000.0
    return InjectionRow(
        event_id=str(event.event_id),
        correlation_id=str(event.correlation_id),
        at=event.emitted_at.timestamp(),
        received_at=received_at,
        project=event.project,
        session=event.session_id,
        agent=p.agent_name,
        trigger=p.trigger.value,
        items=len(p.item_ids),
        chars=p.context_chars,
        size_bytes=p.context_size_bytes,
        tokens=p.token_estimate,
        truncated=p.truncated,
        empty_reason=None if p.context else (p.empty_reason or "unspecified"),
        source=p.context_source.value,
        e2e_ms=e2e,
        retrieval_ms=float(p.retrieval_duration_ms),
        assembly_ms=float(p.assembly_duration_ms),
        backlog=backlog,
    )


def dead_letter_reason(record: DeadLetter) -> str:
    """The runner writes ``"<reason>: <error>"``; the slug when there is one, else the error class."""
    match = _REASON_SLUG.match(record.error_message)
    return match.group(1) if match else record.error_class


def dead_letter_row(record: DeadLetter, project: str | None) -> DeadLetterRow:
    return DeadLetterRow(
        at=record.failed_at.timestamp(),
        project=project,
        original_topic=record.original_topic,
        original_partition=record.original_partition,
        original_offset=record.original_offset,
        consumer_group=record.consumer_group,
        reason=dead_letter_reason(record),
        error_class=record.error_class,
        error_message=record.error_message[:MAX_MESSAGE_CHARS],
        attempts=record.attempts,
    )
