"""Context-gap detection on an agent state document (pure: no I/O, no clock, no broker, no store).

The agent state is what an orchestrator holds about a running agent: its messages, the
cycle analysis, health metrics with cycle times, quality-gate results, the agent's output
flags, a pending handoff, and architecture/sprint hints. :class:`AgentState` reads it
tolerantly (unknown keys kept, every section optional) and names the field when it is wrong.

Five detectors each return :class:`Indicator` s with a weight from :class:`GapPolicy`:

* ``clarification_requested``: a recent message flagged ``clarification_needed``; the latest
  agent message asking a question corroborates (alone it stays below ``min_confidence``);
* ``circular_logic``: ``cycle_analysis.circular_detected``, or recent agent messages that
  *semantically* repeat earlier ones (an injected similarity callable, e.g. embedding cosine);
* ``long_cycle_time``: the agent's current cycle time over ``long_cycle_ratio`` x its baseline;
* ``gate_failure``: a failed gate that names missing context;
* ``explicit_flag``: the agent's output flags ``missing_context``.

Confidence is a noisy-OR over reasons (the strongest indicator of each reason counts once):
``1 - prod(1 - w)``. A gap needs ``confidence >= min_confidence``; its query puts what is
missing first, then the task, the latest user and agent messages and the component names;
architecture/sprint files and domain travel as the request's ``mentioned_files``/``domain``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from ctxbus.contract.payloads import MAX_PROMPT_CHARS, TaskType
from ctxbus.core.agent_state import (
    DEFAULT_TARGET,
    HANDOFF_TARGET,
    MAX_MENTIONED_FILES,
    USER_ROLES,
    AgentState,
    Message,
    needs,
)

#: Text similarity in -1..1 (higher: closer in meaning), e.g. the cosine of two embeddings.
Similarity = Callable[[str, str], float]


class GapReason(StrEnum):
    CLARIFICATION_REQUESTED = "clarification_requested"
    CIRCULAR_LOGIC = "circular_logic"
    LONG_CYCLE_TIME = "long_cycle_time"
    GATE_FAILURE = "gate_failure"
    EXPLICIT_FLAG = "explicit_flag"


_R = GapReason


# --- policy ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GapPolicy:
    """Every threshold and weight of gap detection. Weights are in (0, 1]: the probability an
    indicator alone means a gap; ``min_confidence`` is the noisy-OR a gap needs."""

    #: latest messages searched for a ``clarification_needed`` flag
    recent_messages: int = 10
    #: a recent message flagged ``clarification_needed``
    clarification_flag_weight: float = 0.9
    #: the latest agent message asks a question: corroboration only, below ``min_confidence`` alone
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


# --- detectors ---------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _agent_messages(state: AgentState) -> list[Message]:
    return [m for m in state.messages if m.from_agent and m.content.strip()]


def detect_clarification(state: AgentState, policy: GapPolicy) -> list[Indicator]:
    """Recent messages flagged ``clarification_needed``; the latest agent message ending in a question."""
    out = []
    first = max(0, len(state.messages) - policy.recent_messages)
    for index, message in enumerate(state.messages[first:], start=first):
        if message.clarification_needed:
            evidence, weight = f"message {index} asks for clarification", policy.clarification_flag_weight
            out.append(Indicator(_R.CLARIFICATION_REQUESTED, "clarification_flag", weight, evidence, message.content))
    agents = _agent_messages(state)
    if agents and agents[-1].content.rstrip().endswith("?") and not agents[-1].clarification_needed:
        evidence, weight = "the latest agent message asks a question", policy.clarification_question_weight
        out.append(Indicator(_R.CLARIFICATION_REQUESTED, "agent_question", weight, evidence, agents[-1].content))
    return out


def detect_circular_logic(state: AgentState, policy: GapPolicy, similarity: Similarity | None) -> list[Indicator]:
    """The cycle analysis' flag; and, given ``similarity``, agent messages that say again what an
    earlier one in the window said (closest earlier message at or above ``circular_similarity``)."""
    out: list[Indicator] = []
    cycle = state.cycle_analysis
    if cycle is not None and cycle.circular_detected:
        evidence = "cycle analysis detected circular logic" + (f" on {cycle.topic}" if cycle.topic else "")
        out.append(
            Indicator(_R.CIRCULAR_LOGIC, "cycle_analysis", policy.circular_flag_weight, evidence, cycle.topic or "")
        )
    if similarity is None:
        return out
    window = [m.content for m in _agent_messages(state)[-policy.circular_window :]]
    closest = [max(similarity(window[i], window[j]) for i in range(j)) for j in range(1, len(window))]
    repeats = [j + 1 for j, best in enumerate(closest) if best >= policy.circular_similarity]
    if len(repeats) >= policy.circular_min_repeats:
        evidence = (
            f"{len(repeats)} of the last {len(window)} agent messages repeat an earlier one "
            f"(similarity >= {policy.circular_similarity:g}, closest {max(closest):.2f})"
        )
        weight = policy.circular_semantic_weight
        out.append(Indicator(_R.CIRCULAR_LOGIC, "semantic_repetition", weight, evidence, window[repeats[-1]]))
    return out


def detect_long_cycle(state: AgentState, policy: GapPolicy) -> list[Indicator]:
    """The current agent's cycle time strictly above ``long_cycle_ratio`` x its baseline (its own,
    else the average cycle time); no baseline, no judgement."""
    health, agent = state.health_metrics, state.current_agent
    if health is None or agent is None or agent not in health.agent_cycle_times:
        return []
    current = health.agent_cycle_times[agent]
    baseline = health.baseline_cycle_times.get(agent, health.average_cycle_time)
    if not baseline or current <= policy.long_cycle_ratio * baseline:
        return []
    evidence = (
        f"{agent} cycle {current:g}s is {current / baseline:.2f}x its baseline {baseline:g}s "
        f"(limit {policy.long_cycle_ratio:g}x)"
    )
    return [Indicator(_R.LONG_CYCLE_TIME, "cycle_time", policy.long_cycle_weight, evidence)]


def detect_gate_failure(state: AgentState, policy: GapPolicy) -> list[Indicator]:
    """Failed gates naming missing context (a ``missing_context`` value, or the reason code ``missing_context``)."""
    out = []
    for gate in state.gate_results:
        lacks, items = gate.lacks_context
        if gate.passed or not lacks:
            continue
        need = "; ".join(items) or gate.reason
        evidence = f"gate {gate.gate} failed for missing context" + (f": {need}" if need else "")
        weight = policy.gate_failure_weight
        out.append(Indicator(_R.GATE_FAILURE, "gate_missing_context", weight, evidence, f"{gate.gate}: {need}"))
    return out


def detect_explicit_flag(state: AgentState, policy: GapPolicy) -> list[Indicator]:
    output = state.agent_output
    flagged, items = needs(output.missing_context) if output is not None else (False, ())
    if output is None or not flagged:
        return []
    listed = "; ".join(items)
    evidence = f"{output.agent or state.current_agent or 'the agent'} flagged missing context" + (
        f": {listed}" if listed else ""
    )
    return [Indicator(_R.EXPLICIT_FLAG, "missing_context_flag", policy.explicit_flag_weight, evidence, listed)]


def combine_confidence(indicators: tuple[Indicator, ...] | list[Indicator]) -> float:
    """Noisy-OR over reasons; several indicators of one reason count as its strongest one."""
    strongest: dict[GapReason, float] = {}
    for ind in indicators:
        strongest[ind.reason] = max(strongest.get(ind.reason, 0.0), ind.weight)
    return 1.0 - math.prod(1.0 - w for w in strongest.values())


# --- query and target --------------------------------------------------------------------------


def handoff_pending(state: AgentState) -> bool:
    return state.handoff is not None and state.handoff.is_pending


def injection_target(state: AgentState) -> str:
    """The state's own target, else ``handoff_context`` before a pending handoff, else ``injected_context``."""
    if state.injection_target:
        return state.injection_target
    return HANDOFF_TARGET if handoff_pending(state) else DEFAULT_TARGET


def needing_agent(state: AgentState) -> str | None:
    """The agent the context is for: the receiver of a pending handoff, else the current agent."""
    if handoff_pending(state) and state.handoff is not None and state.handoff.to_agent:
        return state.handoff.to_agent
    return state.current_agent


def _unique(values: list[str], limit: int) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))[:limit]


def build_query(state: AgentState, indicators: tuple[Indicator, ...], policy: GapPolicy) -> GapQuery:
    """What is missing first (strongest indicator first), then the task, story, latest messages, components."""
    hints = [h for h in (state.architecture, state.sprint) if h is not None]
    parts = [i.need for i in sorted(indicators, key=lambda i: -i.weight)]
    parts += [f"Task: {state.task}" if state.task else ""]
    parts += [f"Story: {h.current_story}" for h in hints if h.current_story]
    users = [m.content for m in state.messages if m.role.strip().lower() in USER_ROLES and m.content.strip()]
    agents = _agent_messages(state)
    parts += [f"User: {users[-1]}" if users else "", agents[-1].content if agents else ""]
    components = _unique([c for h in hints for c in h.components], policy.max_mentioned_files)
    parts += [f"Components: {', '.join(components)}" if components else ""]
    clipped = [_clip(p, policy.max_part_chars) for p in parts if p.strip()]
    text = "\n".join(dict.fromkeys(clipped))
    if not text:
        reasons = ", ".join(dict.fromkeys(i.reason.value for i in indicators))
        text = f"{reasons} for agent {needing_agent(state) or 'unknown'}"
    domains = [state.domain, *(h.domain for h in hints)]
    return GapQuery(
        text=text[: policy.max_query_chars],
        domain=next((d.strip() for d in domains if d and d.strip()), None),
        mentioned_files=_unique([f for h in hints for f in h.files], policy.max_mentioned_files),
        task_type=state.task_type,
    )


# --- the decision ------------------------------------------------------------------------------


def assess_gap(state: AgentState, policy: GapPolicy, similarity: Similarity | None = None) -> GapAssessment:
    """Run every detector. Without ``similarity`` the semantic repetition check is skipped."""
    indicators = tuple(
        detect_explicit_flag(state, policy)
        + detect_gate_failure(state, policy)
        + detect_clarification(state, policy)
        + detect_circular_logic(state, policy, similarity)
        + detect_long_cycle(state, policy)
    )
    confidence = combine_confidence(indicators)
    if not indicators:
        return GapAssessment((), 0.0, None, "no gap indicators in the state")
    if confidence < policy.min_confidence:
        seen = ", ".join(i.signal for i in indicators)
        why = f"confidence {confidence:.2f} below {policy.min_confidence:g} (indicators: {seen})"
        return GapAssessment(indicators, confidence, None, why)
    primary = max(indicators, key=lambda i: i.weight)
    gap = Gap(
        agent=needing_agent(state),
        reason=primary.reason,
        confidence=confidence,
        indicators=indicators,
        query=build_query(state, indicators, policy),
        target=injection_target(state),
    )
    return GapAssessment(indicators, confidence, gap, f"{primary.reason.value} at confidence {confidence:.2f}")


def detect_gap(state: AgentState, policy: GapPolicy, similarity: Similarity | None = None) -> Gap | None:
    return assess_gap(state, policy, similarity).gap
