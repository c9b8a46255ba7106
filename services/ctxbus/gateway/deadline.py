"""How long the gateway waits for a hook's injection, and the deadline it puts on the request: the hook's
budget is one wait (publishing included) that ends at a fixed moment; the request's deadline is that
moment less the answer's way back (``ctxbus.core.deadlines.RETURN_MARGIN_S``), so the services never work
on a request whose answer could no longer reach the hook."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ctxbus.core.deadlines import deadline_for

#: the shortest wait given to a step (asyncio.wait_for with 0 gives no chance at all)
MIN_STEP_S = 0.001


@dataclass(frozen=True, slots=True)
class HookWait:
    """One hook call's wait: ends ``budget_s`` after it started."""

    ends_at: float  # time.monotonic()
    request_deadline: datetime

    @classmethod
    def start(cls, budget_s: float) -> HookWait:
        now = datetime.now(UTC)
        return cls(time.monotonic() + budget_s, deadline_for(now, budget_s))

    def left(self) -> float:
        """Seconds until the wait ends (at least a millisecond, so a step can still finish at once)."""
        return max(MIN_STEP_S, self.ends_at - time.monotonic())
