"""When ``ctxbus up`` recycles its embedded broker (pure: no clock, no Kafka).

The embedded broker (Tansu 0.6, memory storage) goes through every batch a partition holds on each fetch that
returns records of it: a produce -> fetch round trip costs it about 1 ms more per 1,000 one-record batches in
the partition (``ctxbus bench broker``), and the request path sends one record per batch. So a stack that runs
for days gets slower with every request it has answered. A restart of ``up`` resets the cost: the archive
refills the fresh broker in large batches, which cost it almost nothing (+0.02 ms per 1,000 records).

Recycling is that restart, done by ``up`` itself at a quiet moment: once the fullest partition has had
``max_records`` records appended since the broker started, and nothing at all was written to any topic for
``idle_s`` (no request in flight, and none for a while), ``up`` stops its services in order, drains the archive,
restarts the broker on the same port, refills it, and starts the services again (``ctxbus.cli.up_rounds``).
Records are counted, not batches: a batch holds one record or more, so the count errs towards recycling early.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecyclePolicy:
    """``max_records`` 0: never recycle."""

    max_records: int
    idle_s: float

    def __post_init__(self) -> None:
        if self.max_records < 0:
            raise ValueError(f"max_records must not be negative, got {self.max_records}")
        if self.idle_s <= 0:
            raise ValueError(f"idle_s must be positive, got {self.idle_s}")

    @property
    def enabled(self) -> bool:
        return self.max_records > 0

    def due(self, fullest: int, idle_for_s: float) -> str | None:
        """Why the broker should be recycled now (None: not now).

        ``fullest``: records appended to the fullest partition since the broker started; ``idle_for_s``: seconds
        since the last record was appended to any topic (or since the broker started, when none was)."""
        if not self.enabled or fullest < self.max_records or idle_for_s < self.idle_s:
            return None
        return (
            f"a partition had {fullest} records appended since the broker started (limit {self.max_records}) "
            f"and nothing was written for {idle_for_s:.0f} s"
        )
