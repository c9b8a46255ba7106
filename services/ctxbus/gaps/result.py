"""What filling a gap produced: the result, and the state copy with the context and its log entry."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected
from ctxbus.core.agent_state import INJECTION_LOG_KEY
from ctxbus.core.gap_sources import Composition
from ctxbus.core.gaps import Gap


class GapStatus(StrEnum):
    INJECTED = "injected"
    #: a gap, a request, an answer, but nothing relevant enough to inject (the answer says why)
    EMPTY = "empty"
    NO_GAP = "no_gap"


@dataclass(frozen=True, slots=True)
class GapResult:
    """What :func:`~ctxbus.gaps.fill_gap` did: the (new) state, the gap, why when nothing was injected,
    how long it took and how big the context is."""

    status: GapStatus
    state: dict[str, Any]
    why: str
    gap: Gap | None = None
    target: str | None = None
    correlation_id: uuid.UUID | None = None
    item_ids: tuple[str, ...] = ()
    context_chars: int = 0
    #: the injected context's size in UTF-8 bytes
    context_bytes: int = 0
    #: from reading the state to the state with the context (detection, retrieval, composition)
    duration_ms: float = 0.0
    #: items per source (memory, state, sprint, architecture) in the context
    sources: dict[str, int] = field(default_factory=dict)
    log_entry: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "why": self.why,
            "gap": self.gap.to_dict() if self.gap else None,
            "target": self.target,
            "correlation_id": str(self.correlation_id) if self.correlation_id else None,
            "item_ids": list(self.item_ids),
            "context_chars": self.context_chars,
            "context_bytes": self.context_bytes,
            "duration_ms": self.duration_ms,
            "sources": dict(self.sources),
        }


#: why memory gave nothing when no broker could be asked (the state's own sources still fill the gap)
NO_BROKER = "no_broker"


def apply_injection(
    raw: Mapping[str, Any],
    gap: Gap,
    injected: Envelope[ContextInjected] | None,
    composed: Composition,
    now: datetime,
    duration_ms: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of ``raw`` with the composed context written into the injection's target (``injection_target``, the
    request's as the injector echoes it; the gap's when memory was not asked) (merged into a mapping
    already there, so a handoff's other keys survive) and the log entry appended; and the entry.
    An empty context writes nothing but the log entry. ``injected`` None: memory was not asked (no broker),
    the context is the state's own."""
    item_ids: tuple[str, ...] = injected.payload.item_ids if injected is not None else ()
    memory_empty = injected.payload.empty_reason if injected is not None else NO_BROKER
    correlation = str(injected.correlation_id) if injected is not None else None
    # where the context goes: the injection's own target (the request's, echoed by the injector), else the gap's
    target = injected.payload.injection_target if injected is not None else gap.target
    state = copy.deepcopy(dict(raw))
    text = composed.text
    entry: dict[str, Any] = {
        "gap_id": gap.gap_id,
        "detected_at": gap.detected_at.isoformat(),
        "at": now.isoformat(),
        "agent": gap.agent,
        "gap_reason": gap.reason.value,
        "reasons": [r.value for r in gap.reasons],
        "confidence": round(gap.confidence, 4),
        "correlation_id": correlation,
        "target": target,
        "item_ids": list(item_ids),
        "sources": composed.counts(),
        "chars": len(text),
        "bytes": len(text.encode("utf-8")),
        "duration_ms": duration_ms,
        "empty_reason": None if text else memory_empty,
        "memory_empty_reason": None if item_ids else memory_empty,
    }
    if text:
        written = {
            "context": text,
            "item_ids": list(item_ids),
            "sources": [s.to_dict() for s in composed.snippets],
            "source_counts": composed.counts(),
            "gap_id": gap.gap_id,
            "gap_reason": gap.reason.value,
            "confidence": round(gap.confidence, 4),
            "correlation_id": correlation,
            "injected_at": now.isoformat(),
        }
        existing = state.get(target)
        entry["replaced"] = existing is not None and not isinstance(existing, Mapping)
        state[target] = {**existing, **written} if isinstance(existing, Mapping) else written
    previous = state.get(INJECTION_LOG_KEY)
    state[INJECTION_LOG_KEY] = [*previous, entry] if isinstance(previous, list) else [entry]
    return state, entry
