"""Context-gap detection on an agent state document (pure: no I/O, no clock, no broker, no store).

The agent state is what an orchestrator holds about a running agent: its messages, the
cycle analysis, health metrics with cycle times, quality-gate results, the agent's output
flags, a pending handoff, and architecture/sprint hints. :class:`AgentState` reads it
tolerantly (unknown keys kept, every section optional) and names the field when it is wrong.

Five detectors (:mod:`ctxbus.core.gap_detectors`) each return :class:`Indicator` s with a weight
from :class:`GapPolicy` (:mod:`ctxbus.core.gap_types`). Confidence is a noisy-OR over reasons (the
strongest indicator of each reason counts once): ``1 - prod(1 - w)``. A gap needs
``confidence >= min_confidence``; it carries an id and the time it was detected (given: the clock
is the caller's); its query puts what is missing first, then the task, the latest user and agent
messages and the component names; architecture/sprint files and domain travel as the request's
``mentioned_files``/``domain``.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime

from ctxbus.core.agent_state import DEFAULT_TARGET, HANDOFF_TARGET, USER_ROLES, AgentState
from ctxbus.core.gap_detectors import (
    agent_messages,
    clip,
    detect_circular_logic,
    detect_clarification,
    detect_explicit_flag,
    detect_gate_failure,
    detect_long_cycle,
)
from ctxbus.core.gap_types import Gap, GapAssessment, GapPolicy, GapQuery, GapReason, Indicator, Similarity

__all__ = [
    "Gap",
    "GapAssessment",
    "GapPolicy",
    "GapQuery",
    "GapReason",
    "Indicator",
    "Similarity",
    "assess_gap",
    "build_query",
    "combine_confidence",
    "detect_circular_logic",
    "detect_clarification",
    "detect_explicit_flag",
    "detect_gap",
    "detect_gate_failure",
    "detect_long_cycle",
    "gap_identity",
    "handoff_pending",
    "injection_target",
    "needing_agent",
]

#: the namespace of gap ids (uuid5)
GAP_NAMESPACE = uuid.UUID("5d0c3c1e-4b1f-5a53-9d1e-2f4a6c7b8e90")


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
    agents = agent_messages(state)
    parts += [f"User: {users[-1]}" if users else "", agents[-1].content if agents else ""]
    components = _unique([c for h in hints for c in h.components], policy.max_mentioned_files)
    parts += [f"Components: {', '.join(components)}" if components else ""]
    clipped = [clip(p, policy.max_part_chars) for p in parts if p.strip()]
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


def gap_identity(now: datetime, agent: str | None, indicators: tuple[Indicator, ...], query: GapQuery) -> str:
    """A uuid5 of when and what was detected: the same state at the same time gives the same id."""
    found = "|".join(f"{i.reason.value}:{i.signal}:{i.evidence}" for i in indicators)
    return str(uuid.uuid5(GAP_NAMESPACE, f"{now.isoformat()}|{agent}|{found}|{query.text}"))


def assess_gap(
    state: AgentState,
    policy: GapPolicy,
    similarity: Similarity | None = None,
    *,
    now: datetime,
    gap_id: str | None = None,
) -> GapAssessment:
    """Run every detector. Without ``similarity`` the semantic repetition check is skipped.

    ``now`` (timezone-aware) is the gap's ``detected_at``; ``gap_id`` its id (default :func:`gap_identity`).
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
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
    agent, query = needing_agent(state), build_query(state, indicators, policy)
    gap = Gap(
        gap_id=gap_id or gap_identity(now, agent, indicators, query),
        detected_at=now,
        agent=agent,
        reason=primary.reason,
        confidence=confidence,
        indicators=indicators,
        query=query,
        target=injection_target(state),
    )
    return GapAssessment(indicators, confidence, gap, f"{primary.reason.value} at confidence {confidence:.2f}")


def detect_gap(
    state: AgentState,
    policy: GapPolicy,
    similarity: Similarity | None = None,
    *,
    now: datetime,
    gap_id: str | None = None,
) -> Gap | None:
    return assess_gap(state, policy, similarity, now=now, gap_id=gap_id).gap
