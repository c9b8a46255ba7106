"""The injections a dashboard can open: a bounded store of recent chains, by correlation id.

Each chain keeps the inspection document's two halves (core.inspection: bounded texts); the store keeps
at most ``max_chains`` chains, the least recently touched dropped first. Pure: no Kafka, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted
from ctxbus.core.inspection import Inspection

#: Chains kept (each at most ~10 KB of context plus its ranked items).
DEFAULT_MAX_CHAINS = 500


class InspectionStore:
    def __init__(self, max_chains: int = DEFAULT_MAX_CHAINS) -> None:
        if max_chains < 1:
            raise ValueError(f"max_chains must be at least 1, got {max_chains}")
        self._max = max_chains
        self._chains: OrderedDict[str, Inspection] = OrderedDict()

    def __len__(self) -> int:
        return len(self._chains)

    def _chain(self, correlation_id: str) -> Inspection:
        found = self._chains.get(correlation_id)
        if found is None:
            found = self._chains[correlation_id] = Inspection(correlation_id)
            while len(self._chains) > self._max:
                self._chains.popitem(last=False)
        else:
            self._chains.move_to_end(correlation_id)
        return found

    def add_completed(self, event: Envelope[RetrievalCompleted]) -> None:
        self._chain(str(event.correlation_id)).add_completed(event)

    def add_injected(self, event: Envelope[ContextInjected]) -> None:
        self._chain(str(event.correlation_id)).add_injected(event)

    def get(self, correlation_id: str) -> dict[str, Any] | None:
        """The chain's inspection document, or None when it is not (or no longer) kept."""
        found = self._chains.get(correlation_id.strip())
        return None if found is None else found.document()
