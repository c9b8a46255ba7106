"""What ``ctxbus memory import`` prints: one JSON line per notable item, then the counts (pure).

The same counts whichever way the items went: straight into the store (an :class:`IngestReport`) or through
the bus (the store owner's ``memory.stored`` answers). ``imported`` is the items written as themselves (added or
replacing their own earlier version); ``clustered`` the ones kept as near copies of another item (they stay
searchable; an injected context shows one of a cluster); ``merged`` the exact duplicates folded into the item
they repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryAction, MemoryStored
from ctxbus.memory.ingest import Action, IngestReport

Lines = list[dict[str, object]]
#: items written as themselves
_WRITTEN = (MemoryAction.ADDED, MemoryAction.REPLACED)


def _merge_line(item_id: str, into: str | None) -> dict[str, object]:
    return {"merged": item_id, "into": into, "duplicate": "exact"}


def direct_report(report: IngestReport) -> tuple[Lines, dict[str, int]]:
    lines: Lines = [_merge_line(r.id, r.into) for r in report.merged]
    lines += [
        {"warning": f"supersedes {old!r} of {project!r}: no such item"} for project, old in report.supersede_missing
    ]
    counts = {
        "imported": report.upserted,
        "added": report.count(Action.ADDED),
        "replaced": report.count(Action.REPLACED),
        "merged": len(report.merged),
        "clustered": report.clustered,
        "superseded": len(report.superseded),
    }
    return lines, counts


def stored_report(answers: Sequence[Envelope[MemoryStored]]) -> tuple[Lines, dict[str, int]]:
    results = [r for answer in answers for r in answer.payload.results]
    lines: Lines = []
    for r in results:
        if r.action is MemoryAction.MERGED:
            lines.append(_merge_line(r.id, r.into))
        elif r.action is MemoryAction.REJECTED:
            lines.append({"rejected": r.id, "project": r.project, "reason": r.reason})
        elif r.reason:
            lines.append({"warning": f"{r.id}: {r.reason}"})
    count = {a: sum(1 for r in results if r.action is a) for a in MemoryAction}
    counts = {
        "imported": count[MemoryAction.ADDED] + count[MemoryAction.REPLACED],
        "added": count[MemoryAction.ADDED],
        "replaced": count[MemoryAction.REPLACED],
        "merged": count[MemoryAction.MERGED],
        "clustered": sum(
            1
            for r in results
            if r.action in (MemoryAction.ADDED, MemoryAction.REPLACED) and r.cluster_id not in (None, r.id)
        ),
        "superseded": sum(len(a.payload.superseded) for a in answers),
        "rejected": count[MemoryAction.REJECTED],
    }
    return lines, counts
