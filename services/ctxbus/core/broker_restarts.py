"""When ``ctxbus up`` restarts an embedded broker that died (pure: no clock, no processes).

The broker can die under ``up`` (the OOM killer, a stray ``kill``). ``up`` watches its process, and when it is
gone ends the round as a recycle does, waits a moment that doubles with each recent restart, starts a new broker
on the same port, refills it from the archive and starts the services again (``ctxbus.cli.up_rounds``). At most
``limit`` restarts within any ``window_s`` seconds: a broker that keeps dying stops the stack with the reason
instead of being restarted for ever (the same rule as ``up``'s child processes, ``RestartBudget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxbus.core.process_layout import RestartBudget

#: the first restart waits this long; each further restart within the window waits twice as long
FIRST_DELAY_S = 0.5
#: the longest wait before a restart
MAX_DELAY_S = 8.0


@dataclass
class BrokerRestarts:
    """``limit`` restarts within ``window_s`` seconds, each after a backoff; ``limit`` 0: never restart."""

    limit: int = 3
    window_s: float = 300.0
    first_delay_s: float = FIRST_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    _budget: RestartBudget = field(init=False)

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError(f"limit must not be negative, got {self.limit}")
        if self.window_s <= 0 or self.first_delay_s < 0 or self.max_delay_s < self.first_delay_s:
            raise ValueError("window_s must be positive and 0 <= first_delay_s <= max_delay_s")
        self._budget = RestartBudget(self.limit, self.window_s)

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before restarting a broker that died at ``now`` (monotonic seconds), counting the
        restart; None when the bound is reached (``limit`` restarts within the window already)."""
        if not self._budget.allow(now):
            return None
        return float(min(self.first_delay_s * 2.0 ** (self._budget.used - 1), self.max_delay_s))

    @property
    def used(self) -> int:
        """Restarts counted within the current window."""
        return self._budget.used

    def refusal(self, reason: str) -> str:
        """The line ``up`` stops with once the bound is reached (``reason``: how the broker ended this time)."""
        return (
            f"the embedded broker died {self.limit + 1} times within {self.window_s:g} s (last: {reason}); "
            "stopping the stack (see DATA_DIR/broker.log and up's log; "
            "CTXBUS_KAFKA_EMBEDDED_RESTART_LIMIT sets the bound)"
        )
