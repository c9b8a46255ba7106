"""Ranked memory in and out of the wire: ``RankedHit`` (core) <-> ``RankedItem`` (the completed payload)."""

from __future__ import annotations

from ctxbus.contract.payloads import RankedItem
from ctxbus.core.ranking import RankedHit
from ctxbus.memory.model import MemoryItem, MemoryKind, Severity

#: the memory fields a ranked item carries on the wire, under the same names
CARRIED_FIELDS: set[str] = set(
    {
        "id",
        "project",
        "title",
        "content",
        "source",
        "domains",
        "confidence",
        "success_rate",
        "usage_count",
        "example_reference",
        "outcome",
        "importance",
        "key_insight",
        "lesson_learned",
        "session_id",
        "mitigation",
    }
)


def to_payload_item(hit: RankedHit) -> RankedItem:
    return RankedItem(
        **hit.item.model_dump(include=CARRIED_FIELDS),
        kind=hit.item.kind.value,
        severity=hit.item.severity.value if hit.item.severity else None,
        score=hit.score,
        breakdown=dict(hit.breakdown),
        cluster_id=hit.item.cluster,
        collapsed_ids=hit.collapsed_ids,
    )


def to_ranked_hit(item: RankedItem) -> RankedHit:
    """Raises ValueError (pydantic's ValidationError) when the item is not valid memory."""
    memory = MemoryItem(
        **item.model_dump(include=CARRIED_FIELDS),
        kind=MemoryKind(item.kind),
        severity=Severity(item.severity) if item.severity else None,
        cluster_id=item.cluster_id,
    )
    return RankedHit(item=memory, score=item.score, breakdown=dict(item.breakdown), collapsed_ids=item.collapsed_ids)
