"""What both vector-store adapters share: the point payload of a memory item and the model check."""

from __future__ import annotations

from typing import Any

from ctxbus.memory.model import MemoryItem
from ctxbus.ports import StoreModelMismatch

#: payload fields that are indexed for filtering
INDEXED_KEYWORDS = ("project", "kind", "domains", "id")
DENSE = "dense"


def item_payload(item: MemoryItem) -> dict[str, Any]:
    payload = item.model_dump(mode="json")
    payload["content_hash"] = item.content_hash
    return payload


def payload_item(payload: dict[str, Any]) -> MemoryItem:
    fields = {k: v for k, v in payload.items() if k != "content_hash"}
    return MemoryItem.model_validate(fields)


def check_model(where: str, stored: dict[str, Any], model_id: str, dim: int) -> None:
    """Refuse a store built with another embedding model or dimension."""
    stored_model, stored_dim = stored.get("model_id"), stored.get("dim")
    if stored_model != model_id or stored_dim != dim:
        raise StoreModelMismatch(
            f"{where} was built with the embedding model {stored_model!r} ({stored_dim} dims), "
            f"but ctxbus now embeds with {model_id!r} ({dim} dims): vectors from two models cannot be "
            "compared; re-import the memories into a new store (another CTXBUS_DATA_DIR or collection)"
        )
