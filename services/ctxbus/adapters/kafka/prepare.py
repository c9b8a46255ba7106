"""A handler's preparation for a whole fetch: it gets every new event of the fetch first, in the order they will
be handled, each with how many records wait behind it (the retriever embeds every request's query in one model
call, leaving out those it will answer as expired). Only an optimisation: each event is still handled, answered
and committed on its own, in order, as if there were none."""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Protocol, runtime_checkable

from ctxbus.contract.envelope import AnyEnvelope


@runtime_checkable
class BatchPreparer(Protocol):
    """A handler that can get ready for a whole fetch before it handles its events one by one."""

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> None: ...


def fetch_batch(
    events: Sequence[AnyEnvelope | Exception], waiting: int, answered: Container[str]
) -> list[tuple[AnyEnvelope, int]]:
    """What a preparer gets of a fetch: ``events`` in handling order (an exception for a record that did not
    decode), each with the records behind it (``waiting`` counts the fetch and what the broker holds beyond it),
    without what did not decode, was answered already, or repeats an event before it in the fetch."""
    batch: list[tuple[AnyEnvelope, int]] = []
    seen: set[str] = set()
    for event in events:
        waiting -= 1
        if isinstance(event, Exception) or (event_id := str(event.event_id)) in seen:
            continue
        seen.add(event_id)
        if event_id not in answered:
            batch.append((event, waiting))
    return batch
