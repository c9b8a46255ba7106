"""The five gap detectors (pure): each reads the agent state and returns :class:`Indicator` s.

* ``clarification_requested``: a recent message flagged ``clarification_needed`` (0.9); in the agent's
  unanswered messages a clarification phrase ("unclear", "need more info", "not sure what" ...: 0.75)
  or a question addressed to the user or orchestrator (0.6); any other closing question corroborates
  only (0.4, below ``min_confidence`` alone). Matching is linear in the text (:mod:`ctxbus.core.clarification`);
* ``circular_logic``: ``cycle_analysis.circular_detected``, or recent agent messages that
  *semantically* repeat earlier ones (an injected similarity callable, e.g. embedding cosine);
* ``long_cycle_time``: the agent's current cycle time over ``long_cycle_ratio`` x its baseline;
* ``gate_failure``: a failed gate that names missing context;
* ``explicit_flag``: the agent's output flags ``missing_context``.
"""

from __future__ import annotations

from ctxbus.core.agent_state import USER_ROLES, AgentState, Message, needs
from ctxbus.core.clarification import Finding, clarification, find_phrase, words
from ctxbus.core.gap_types import GapPolicy, GapReason, Indicator, Similarity

_R = GapReason


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def agent_messages(state: AgentState) -> list[Message]:
    return [m for m in state.messages if m.from_agent and m.content.strip()]


def _unanswered(state: AgentState, policy: GapPolicy) -> list[tuple[int, Message]]:
    """Recent agent messages no user message came after (an answered request is no gap)."""
    first = max(0, len(state.messages) - policy.recent_messages)
    out: list[tuple[int, Message]] = []
    for index, message in enumerate(state.messages[first:], start=first):
        if message.role.strip().lower() in USER_ROLES:
            out = []
        elif message.from_agent and message.content.strip():
            out.append((index, message))
    return out


def detect_clarification(state: AgentState, policy: GapPolicy) -> list[Indicator]:
    """Recent messages flagged ``clarification_needed``; and in the agent's unanswered messages a
    clarification phrase (any of them), else a question in the latest one: addressed to the user or
    the orchestrator (a gap alone), or any other (corroboration only). See :mod:`ctxbus.core.clarification`."""
    out = []
    first = max(0, len(state.messages) - policy.recent_messages)
    for index, message in enumerate(state.messages[first:], start=first):
        if message.clarification_needed:
            evidence, weight = f"message {index} asks for clarification", policy.clarification_flag_weight
            out.append(Indicator(_R.CLARIFICATION_REQUESTED, "clarification_flag", weight, evidence, message.content))
    pending = [(i, m) for i, m in _unanswered(state, policy) if not m.clarification_needed]
    phrase = next(((i, m, p) for i, m in reversed(pending) if (p := find_phrase(words(m.content)))), None)
    if phrase is not None:
        index, message, said = phrase
        evidence, weight = f'message {index} says "{said}"', policy.clarification_phrase_weight
        out.append(Indicator(_R.CLARIFICATION_REQUESTED, Finding.PHRASE.value, weight, evidence, message.content))
        return out
    if not pending or pending[-1][1] is not agent_messages(state)[-1]:
        return out
    index, latest = pending[-1]
    found = clarification(latest.content)
    if found is not None and found.finding is Finding.ADDRESSED_QUESTION:
        evidence, weight = f"message {index} asks: {clip(found.evidence, 200)}", policy.addressed_question_weight
        out.append(Indicator(_R.CLARIFICATION_REQUESTED, found.finding.value, weight, evidence, latest.content))
    elif found is not None and found.finding is Finding.QUESTION:
        evidence, weight = "the latest agent message asks a question", policy.clarification_question_weight
        out.append(Indicator(_R.CLARIFICATION_REQUESTED, found.finding.value, weight, evidence, latest.content))
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
    window = [m.content for m in agent_messages(state)[-policy.circular_window :]]
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
