"""The vocabulary of context-gap detection (pure): reasons, the policy of thresholds and weights,
indicators, the query, the gap and the assessment. Detectors are in :mod:`ctxbus.core.gap_detectors`,
the decision in :mod:`ctxbus.core.gaps`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

from ctxbus.contract.payloads import MAX_PROMPT_CHARS, TaskType
from ctxbus.core.agent_state import MAX_MENTIONED_FILES

#: Text similarity in -1..1 (higher: closer in meaning), e.g. the cosine of two embeddings.
Similarity = Callable[[str, str], float]


class GapReason(StrEnum):
    CLARIFICATION_REQUESTED = "clarification_requested"
    CIRCULAR_LOGIC = "circular_logic"
    LONG_CYCLE_TIME = "long_cycle_time"
    GATE_FAILURE = "gate_failure"
    EXPLICIT_FLAG = "explicit_flag"


# --- policy ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GapPolicy:
    """Every threshold and weight of gap detection. Weights are in (0, 1]: the probability an
    indicator alone means a gap; ``min_confidence`` is the noisy-OR a gap needs."""

    #: latest messages searched for a ``clarification_needed`` flag
    recent_messages: int = 10
    #: a recent message flagged ``clarification_needed``
    clarification_flag_weight: float = 0.9
    #: an unanswered agent message says information is missing or unclear ("unclear", "need more info" ...)
    clarification_phrase_weight: float = 0.75
    #: the latest agent message asks the user or the orchestrator a question ("Should I ...?", "Do you ...?")
    addressed_question_weight: float = 0.6
    #: the latest agent message ends with any other question: corroboration only, below ``min_confidence`` alone
    clarification_question_weight: float = 0.4
    #: ``cycle_analysis.circular_detected``
    circular_flag_weight: float = 0.8
    #: recent agent messages semantically repeating earlier ones
    circular_semantic_weight: float = 0.7
    #: latest agent messages compared with each other for repetition
    circular_window: int = 6
    #: similarity at or above which two agent messages say the same thing (MiniLM: rephrasings
    #: of one point score 0.71-0.92, unrelated steps of one task 0.15-0.37)
    circular_similarity: float = 0.75
    #: messages repeating an earlier one (within the window) that make a loop
    circular_min_repeats: int = 2
    #: a cycle strictly longer than this many times the baseline is long
    long_cycle_ratio: float = 2.0
    long_cycle_weight: float = 0.55
    #: a failed gate naming missing context
    gate_failure_weight: float = 0.85
    #: the agent's output flags ``missing_context``
    explicit_flag_weight: float = 0.95
    #: noisy-OR confidence a gap needs
    min_confidence: float = 0.5
    #: the query text's bound (the retriever embeds its first tokens: what is missing comes first)
    max_query_chars: int = 2_000
    #: bound of one part of the query (a message, the task ...)
    max_part_chars: int = 500
    #: mentioned files carried into the request
    max_mentioned_files: int = 20

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value):
                raise ValueError(f"GapPolicy.{f.name} must be finite, got {value}")
            if f.name.endswith(("_weight", "_confidence")) and not 0.0 < value <= 1.0:
                raise ValueError(f"GapPolicy.{f.name} must be in (0, 1], got {value}")
            if isinstance(value, int) and value < 1:
                raise ValueError(f"GapPolicy.{f.name} must be at least 1, got {value}")
        if not -1.0 <= self.circular_similarity <= 1.0:
            raise ValueError(f"GapPolicy.circular_similarity must be in [-1, 1], got {self.circular_similarity}")
        if self.long_cycle_ratio <= 1.0:
            raise ValueError(f"GapPolicy.long_cycle_ratio must be above 1, got {self.long_cycle_ratio}")
        if self.circular_min_repeats >= self.circular_window:
            raise ValueError("GapPolicy.circular_min_repeats must be below circular_window")
        if self.max_query_chars > MAX_PROMPT_CHARS or self.max_part_chars > self.max_query_chars:
            raise ValueError(f"GapPolicy needs max_part_chars <= max_query_chars <= {MAX_PROMPT_CHARS}")
        if self.max_mentioned_files > MAX_MENTIONED_FILES:
            raise ValueError(f"GapPolicy.max_mentioned_files must be at most {MAX_MENTIONED_FILES}")


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Indicator:
    """Evidence of a gap: which reason, which signal, how strong, what was seen, what is needed."""

    reason: GapReason
    signal: str
    weight: float
    evidence: str
    need: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason.value, "signal": self.signal, "weight": self.weight, "evidence": self.evidence}


@dataclass(frozen=True, slots=True)
class GapQuery:
    """What to retrieve: the query text and the hints the request carries."""

    text: str
    domain: str | None = None
    mentioned_files: tuple[str, ...] = ()
    task_type: TaskType | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """A detected gap: ``gap_id`` identifies it from detection to the injection log (the same state,
    time and findings give the same id), ``detected_at`` is when it was detected."""

    gap_id: str
    detected_at: datetime
    agent: str | None
    reason: GapReason
    confidence: float
    indicators: tuple[Indicator, ...]
    query: GapQuery
    target: str

    @property
    def reasons(self) -> tuple[GapReason, ...]:
        return tuple(dict.fromkeys(i.reason for i in self.indicators))

    def to_dict(self) -> dict[str, Any]:
        q = self.query
        return {
            "gap_id": self.gap_id,
            "detected_at": self.detected_at.isoformat(),
            "agent": self.agent,
            "reason": self.reason.value,
            "reasons": [r.value for r in self.reasons],
            "confidence": round(self.confidence, 4),
            "indicators": [i.to_dict() for i in self.indicators],
            "query": q.text,
            "domain": q.domain,
            "mentioned_files": list(q.mentioned_files),
            "task_type": q.task_type.value if q.task_type else None,
            "target": self.target,
        }


@dataclass(frozen=True, slots=True)
class GapAssessment:
    """Every indicator found, the combined confidence, the gap (if any) and why not."""

    indicators: tuple[Indicator, ...]
    confidence: float
    gap: Gap | None
    why: str
