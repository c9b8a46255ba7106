"""A decoded event's envelope and payload -> its compact fact (fields an older version lacks take their defaults)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.replay.facts import (
    COMPLETED,
    INJECTED,
    OUTCOME,
    REQUESTED,
    CompletedFact,
    Fact,
    InjectedFact,
    OutcomeFact,
    RequestedFact,
)


def _get(d: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = d.get(key, default)
    return default if value is None and default is not None else value


def _items(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(i["id"] for i in payload.get("items") or ())


def _global_items(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(i["id"] for i in payload.get("items") or () if i.get("project") == GLOBAL_PROJECT)


def _head(env: Mapping[str, Any], schema_id: int) -> tuple[str, str, str, str, int, int]:
    """The fields every fact starts with: the envelope's ids, project and time, and the record's schema id."""
    return env["event_id"], env["correlation_id"], env["session_id"], env["project"], env["emitted_at"], schema_id


def requested_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> RequestedFact:
    return RequestedFact(
        *_head(env, schema_id),
        p["agent_name"],
        _get(p, "agent_role", "implementer"),
        p["trigger"],
        p.get("task_type"),
        p.get("task_id"),
        p.get("domain"),
        _get(p, "max_tokens", 2_000),
        _get(p, "max_items", 10),
    )


def completed_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> CompletedFact:
    req = p.get("request") or {}
    return CompletedFact(
        *_head(env, schema_id),
        p["request_emitted_at"],
        req.get("agent_name", ""),
        _get(req, "agent_role", "implementer"),
        req.get("trigger", ""),
        req.get("task_id"),
        req.get("domain"),
        _get(p, "profile", "implementer"),
        p.get("task_type"),
        p.get("fingerprint"),
        _get(p, "candidates_considered", 0),
        float(_get(p, "retrieval_duration_ms", 0.0)),
        p.get("empty_reason"),
        _items(p),
        _global_items(p),
    )


def injected_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> InjectedFact:
    return InjectedFact(
        *_head(env, schema_id),
        p.get("request_emitted_at"),
        p["agent_name"],
        _get(p, "agent_role", "implementer"),
        p["trigger"],
        p["context_source"],
        tuple(p.get("item_ids") or ()),
        p["token_estimate"],
        p["context_chars"],
        p["context_size_bytes"],
        bool(p.get("truncated")),
        p.get("empty_reason"),
        float(_get(p, "assembly_duration_ms", 0.0)),
        float(p["retrieval_duration_ms"]),
        p.get("task_id"),
        tuple(p.get("global_item_ids") or ()),
        p.get("fingerprint"),
    )


def outcome_fact(env: Mapping[str, Any], p: Mapping[str, Any], schema_id: int) -> OutcomeFact:
    return OutcomeFact(
        *_head(env, schema_id),
        _get(p, "scope", "session"),
        p.get("task_id"),
        _get(p, "outcome", "unknown"),
        p["source"],
    )


FACTS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], int], Fact]] = {
    REQUESTED: requested_fact,
    COMPLETED: completed_fact,
    INJECTED: injected_fact,
    OUTCOME: outcome_fact,
}
