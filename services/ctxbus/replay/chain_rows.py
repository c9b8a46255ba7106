"""One row per request (the CSV and Parquet outputs of ``ctxbus replay``): the chain's facts, flattened."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ctxbus.replay.join import STATUS_EMPTY, Chain


def from_us(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


#: The chain table (CSV, Parquet): column -> type ("str", "int", "float", "bool", "time", "list").
CHAIN_COLUMNS: dict[str, str] = {
    "correlation_id": "str",
    "project": "str",
    "session_id": "str",
    "agent_name": "str",
    "agent_role": "str",
    "trigger": "str",
    "task_id": "str",
    "profile": "str",
    "task_type": "str",
    "fingerprint": "str",
    "status": "str",
    "requested_at": "time",
    "request_to_completed_ms": "float",
    "completed_to_injected_ms": "float",
    "end_to_end_ms": "float",
    "retrieval_ms": "float",
    "assembly_ms": "float",
    "candidates": "int",
    "items_retrieved": "int",
    "items_injected": "int",
    "token_estimate": "int",
    "context_chars": "int",
    "context_bytes": "int",
    "truncated": "bool",
    "empty_reason": "str",
    "outcome": "str",
    "outcome_via": "str",
    "dead_letter_reason": "str",
    "dead_letter_error_class": "str",
    "requested_schema_id": "int",
    "completed_schema_id": "int",
    "injected_schema_id": "int",
    "injected_item_ids": "list",
}


def chain_row(chain: Chain) -> dict[str, Any]:
    req, done, inj, dead = chain.requested, chain.completed, chain.injected, chain.dead_letter
    start = chain.request_us
    return {
        "correlation_id": chain.correlation_id,
        "project": chain.project,
        "session_id": chain.session_id,
        "agent_name": chain.agent_name,
        "agent_role": chain.agent_role,
        "trigger": chain.trigger,
        "task_id": chain.task_id,
        "profile": chain.profile,
        "task_type": chain.task_type,
        "fingerprint": chain.fingerprint,
        "status": chain.status,
        "requested_at": from_us(start) if start is not None else None,
        "request_to_completed_ms": chain.request_to_completed_ms,
        "completed_to_injected_ms": chain.completed_to_injected_ms,
        "end_to_end_ms": chain.end_to_end_ms,
        "retrieval_ms": done.retrieval_ms if done else None,
        "assembly_ms": inj.assembly_ms if inj else None,
        "candidates": done.candidates if done else None,
        "items_retrieved": len(done.item_ids) if done else None,
        "items_injected": len(inj.item_ids) if inj else None,
        "token_estimate": inj.token_estimate if inj else None,
        "context_chars": inj.context_chars if inj else None,
        "context_bytes": inj.context_bytes if inj else None,
        "truncated": inj.truncated if inj else None,
        "empty_reason": chain.empty_reason if chain.status == STATUS_EMPTY else None,
        "outcome": chain.outcome_value,
        "outcome_via": chain.outcome_via,
        "dead_letter_reason": dead.reason if dead else None,
        "dead_letter_error_class": dead.error_class if dead else None,
        "requested_schema_id": req.schema_id if req else None,
        "completed_schema_id": done.schema_id if done else None,
        "injected_schema_id": inj.schema_id if inj else None,
        "injected_item_ids": list(inj.item_ids) if inj else [],
    }


def chain_rows(chains: Iterable[Chain]) -> list[dict[str, Any]]:
    return [chain_row(c) for c in chains]
