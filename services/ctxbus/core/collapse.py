"""Near copies collapsed where they cost something: in an injected context, never in search results.

Ingestion keeps near copies as separate items linked by a cluster id (:mod:`ctxbus.memory.ingest`), so no memory
becomes unretrievable because another looks like it. A context that showed several members of one cluster would
spend its item places and its character and token budget on one memory said several ways: the retriever keeps the
best-ranked member of each cluster, lists the others in its ``collapsed_ids``, and gives the freed places to the
next distinct items. Clusters are per project (an item of the global scope never collapses a project's item).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ctxbus.core.ranking import RankedHit


def collapse_near_copies(hits: Sequence[RankedHit], limit: int, *, collapse: bool = True) -> list[RankedHit]:
    """At most ``limit`` of ``hits`` (best first), one per (project, cluster) when ``collapse``.

    Each kept hit is the first of its cluster in ``hits``; its ``collapsed_ids`` are the ids of the cluster's other
    members among ``hits`` (in rank order, also those below the cut). Without ``collapse``: the first ``limit``.
    """
    if not collapse:
        return list(hits[:limit])
    kept: list[RankedHit] = []
    copies: dict[tuple[str, str], list[str]] = {}
    for hit in hits:
        cluster = (hit.item.project, hit.item.cluster)
        if cluster in copies:
            copies[cluster].append(hit.item.id)
        elif len(kept) < limit:
            copies[cluster] = []
            kept.append(hit)
    return [
        dataclasses.replace(h, collapsed_ids=(*h.collapsed_ids, *copies[(h.item.project, h.item.cluster)]))
        for h in kept
    ]
