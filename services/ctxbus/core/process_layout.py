"""How ``ctxbus up`` spreads its services over processes, and how often a service process may be restarted.

Pure: no processes are started here. The store's owner (the retriever with its memory and learning loops)
stays in ``up`` with the gateway, which serves the Python API on the same store; the injector and the recorder
share no store and may run in child processes of ``up`` (each of their SQLite files opened by one process).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: services that may leave the ``up`` process, in the order they are moved out
MOVABLE = ("injector", "recorder")
#: the most processes ``ctxbus up`` runs its services in: itself and one per movable service
MAX_PROCESSES = 1 + len(MOVABLE)


def auto_processes(cpus: int) -> int:
    """The default: a second process when there is a second core to run it on."""
    return 2 if cpus >= 2 else 1


@dataclass(frozen=True, slots=True)
class Layout:
    """The services ``up`` runs itself, and the groups of services each child process runs."""

    in_up: tuple[str, ...]
    children: tuple[tuple[str, ...], ...]


def split(services: tuple[str, ...], processes: int) -> Layout:
    """Services over ``processes`` processes: 1 keeps all in ``up``; 2 moves the movable ones into one child;
    3 gives each its own. More processes than there are movable services to give them is the same as fewer."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    movable = tuple(s for s in MOVABLE if s in services)
    children = min(processes - 1, len(movable))
    if children == 0:
        return Layout(services, ())
    groups: list[list[str]] = [[] for _ in range(children)]
    for i, name in enumerate(movable):  # in MOVABLE's order, the last child takes what is left
        groups[min(i, children - 1)].append(name)
    return Layout(tuple(s for s in services if s not in movable), tuple(tuple(g) for g in groups))


def process_name(services: tuple[str, ...]) -> str:
    """How logs and the health check name a child process: its services joined by ``+``."""
    return "+".join(services)


@dataclass
class RestartBudget:
    """At most ``limit`` restarts within any ``window_s`` seconds: a child that keeps dying stops the stack
    instead of being restarted for ever."""

    limit: int = 3
    window_s: float = 300.0
    _restarts: deque[float] = field(default_factory=deque)

    def allow(self, now: float) -> bool:
        """Whether a child that exited at ``now`` (monotonic seconds) may be restarted; counts the restart."""
        while self._restarts and now - self._restarts[0] >= self.window_s:
            self._restarts.popleft()
        if len(self._restarts) >= self.limit:
            return False
        self._restarts.append(now)
        return True

    @property
    def used(self) -> int:
        return len(self._restarts)
