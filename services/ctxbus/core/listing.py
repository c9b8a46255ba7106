"""What ``ctxbus memory list|show``, ``Memory.list|get`` and the dashboard's memory view show of items (pure).

A row is one item at a glance: id, kind, source, conviction (as ranking sees it: learned from outcomes,
:mod:`ctxbus.core.learning`), uses, pinned, stale and the title. A document is the whole item plus what learning
knows of it: outcomes, success rate, injections and the last one, and its near copies (same cluster).

**Stale** is an item another one superseded (``supersedes``: kept for history and never retrieved), or one that
names a file that was deleted or rewritten past recognition since it was stored (:mod:`ctxbus.core.staleness`:
still retrieved, down-weighted). A listing shows the items searches may return (a stale-marked one among them,
with why) unless asked for the stale ones only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ctxbus.core.learning import learned_conviction, learned_success_rate, learned_usage
from ctxbus.memory.model import MemoryItem, MemoryKind

KINDS = tuple(k.value for k in MemoryKind)


class UnknownItem(LookupError):
    """No item of that id in that project."""

    def __init__(self, project: str, item_id: str) -> None:
        super().__init__(f"no memory item {item_id!r} in project {project!r}")
        self.project = project
        self.item_id = item_id


@dataclass(frozen=True, slots=True)
class ItemFilter:
    """Which items a listing keeps: every given condition must hold."""

    kind: str | None = None
    #: a substring of the item's source, case-insensitive
    source: str | None = None
    #: True: only stale items (superseded, or naming a deleted or rewritten file); False: every item searches return
    stale: bool = False
    #: True: only pinned; False: only unpinned; None: both
    pinned: bool | None = None

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; valid: {', '.join(KINDS)}")

    def keeps(self, item: MemoryItem) -> bool:
        if self.kind is not None and item.kind.value != self.kind:
            return False
        if self.source is not None and self.source.casefold() not in item.source.casefold():
            return False
        if self.pinned is not None and item.pinned is not self.pinned:
            return False
        return is_stale(item) if self.stale else item.active


def is_stale(item: MemoryItem) -> bool:
    """Superseded by another item, or marked stale because a file it names was deleted or rewritten."""
    return not item.active or item.stale is not None


def stale_reason(item: MemoryItem) -> str | None:
    """Why the item is stale (None: it is not)."""
    if not item.active:
        return f"superseded by {item.superseded_by}"
    return item.stale


def select(items: Iterable[MemoryItem], keep: ItemFilter) -> list[MemoryItem]:
    return [i for i in items if keep.keeps(i)]


@dataclass(frozen=True, slots=True)
class ItemHistory:
    """What the learning ledger knows of an item: its injections and the last one."""

    injections: int = 0
    last_injected: datetime | None = None


def row(item: MemoryItem, history: ItemHistory | None = None) -> dict[str, Any]:
    """One item at a glance (JSON-ready); with its ``history``, its injections and the last one too."""
    fb = item.feedback
    seen: dict[str, Any] = {}
    if history is not None:
        last = history.last_injected.isoformat() if history.last_injected else None
        seen = {"injections": history.injections, "last_injected": last}
    return {
        **seen,
        "outcomes": {"successful": fb.successes, "partial": fb.partials, "failed": fb.failures},
        "id": item.id,
        "project": item.project,
        "kind": item.kind.value,
        "source": item.source,
        "conviction": round(learned_conviction(item), 4),
        "uses": learned_usage(item),
        "pinned": item.pinned,
        "stale": is_stale(item),
        "stale_reason": stale_reason(item),
        "title": item.title or item.content.split("\n", 1)[0],
    }


def document(item: MemoryItem, history: ItemHistory, near: Sequence[MemoryItem]) -> dict[str, Any]:
    """The whole item and what learning knows of it (JSON-ready); ``near``: the other items of its cluster."""
    fb = item.feedback
    rated = fb.successes + fb.partials + fb.failures
    rate = learned_success_rate(item)
    return {
        **item.model_dump(mode="json", exclude={"feedback"}),
        "stale": is_stale(item),
        "stale_reason": stale_reason(item),
        "conviction": round(learned_conviction(item), 4),
        "imported_confidence": item.confidence,
        "uses": learned_usage(item),
        "outcomes": {"successful": fb.successes, "partial": fb.partials, "failed": fb.failures, "rated": rated},
        "success_rate": None if rate is None else round(rate, 4),
        "injections": history.injections,
        "last_injected": history.last_injected.isoformat() if history.last_injected else None,
        "near_copies": [i.id for i in near if i.id != item.id],
    }


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    if width <= 0:
        return ""
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def table(rows: Sequence[dict[str, Any]], width: int) -> list[str]:
    """The compact table of ``ctxbus memory list``: id, kind, source, conviction, uses, title clipped to ``width``
    (a pinned item is marked ``*`` before its id, a stale one ``~``)."""
    head = ("ID", "KIND", "SOURCE", "CONV", "USES")
    cells = [
        (
            ("*" if r["pinned"] else "~" if r["stale"] else "") + r["id"],
            r["kind"],
            clip(r["source"], 24),
            f"{r['conviction']:.2f}",
            str(r["uses"]),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[n]) for c in cells)) if cells else len(h) for n, h in enumerate(head)]
    used = sum(widths) + 2 * len(widths)
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + "  TITLE"]
    for r, c in zip(rows, cells, strict=True):
        title = f"[stale: {r['stale_reason']}] {r['title']}" if r.get("stale_reason") else r["title"]
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)) + "  " + clip(title, width - used))
    return [line.rstrip() for line in lines]


_COUNTS = {"successful": "successes", "partial": "partials", "failed": "failures"}


def conviction_move(item: MemoryItem, outcome: str) -> tuple[float, float]:
    """(conviction without one ``outcome``, with it): what that outcome changed, the other outcomes counted."""
    after = learned_conviction(item)
    field = _COUNTS.get(outcome)
    fb = item.feedback
    if field is None or getattr(fb, field) == 0 or fb.uses == 0:
        return after, after  # unknown outcomes count as uses only
    fewer = fb.model_copy(update={field: getattr(fb, field) - 1, "uses": fb.uses - 1})
    return learned_conviction(item.model_copy(update={"feedback": fewer})), after


def session_change(
    project: str, session_id: str, task_id: str | None, outcome: str, at: datetime, items: Sequence[MemoryItem]
) -> dict[str, Any]:
    """One outcome and what it changed: each counted item's conviction before and after it, biggest move first
    (items since forgotten are left out)."""
    moved = sorted(
        ((item, *conviction_move(item, outcome)) for item in items), key=lambda m: (-abs(m[2] - m[1]), m[0].id)
    )
    moves = [{"id": i.id, "project": i.project, "before": round(b, 4), "after": round(a, 4)} for i, b, a in moved]
    return {
        "project": project,
        "session_id": session_id,
        "task_id": task_id,
        "outcome": outcome,
        "at": at.isoformat(),
        "changed": moves,
    }
