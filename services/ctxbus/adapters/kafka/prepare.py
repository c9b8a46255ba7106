"""A handler's preparation for the events of a fetch: before it handles one, it gets it and every new event
after it in the fetch, in the order they will be handled, each with how many records wait behind it, and says
how many of them it got ready for; the loop asks again when it reaches the next (the retriever embeds the next
requests' queries in one model call, at most a batch, leaving out those it will answer as expired). It never
waits for events to come. Only an optimisation: each event is still handled, answered and committed on its own,
in order, as if there were none."""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Protocol, runtime_checkable

from ctxbus.contract.envelope import AnyEnvelope


@runtime_checkable
class BatchPreparer(Protocol):
    """A handler that can get ready for the next events of a fetch before it handles them one by one."""

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> int:
        """Get ready for the first events of ``batch``; how many (the rest are offered again later)."""
        ...


def fetch_batch(
    events: Sequence[AnyEnvelope | Exception], waiting: int, answered: Container[str]
) -> tuple[list[int], list[tuple[AnyEnvelope, int]]]:
    """What a preparer gets of the rest of a fetch: ``events`` in handling order (an exception for a record that
    did not decode), each with the records behind it (``waiting`` counts the records from the first on, to the
    broker's end), without what did not decode, was answered already, or repeats an event before it; and, for
    each one given, where the events after it start in ``events``."""
    batch: list[tuple[AnyEnvelope, int]] = []
    after: list[int] = []
    seen: set[str] = set()
    for position, event in enumerate(events):
        waiting -= 1
        if isinstance(event, Exception) or (event_id := str(event.event_id)) in seen:
            continue
        seen.add(event_id)
        if event_id not in answered:
            batch.append((event, waiting))
            after.append(position + 1)
    return after, batch
