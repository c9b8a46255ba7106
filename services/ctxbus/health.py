"""Liveness and readiness of one ctxbus process, served beside ``/metrics``.

- ``/healthz``: the process is alive and serving (always 200 while it runs);
- ``/readyz``: 200 when every registered check passes, else 503 with each check's reason. Wiring
  registers what a process needs: its consumers have their partitions and reach the broker, its store
  answers. Checks run in the HTTP server's thread, per request: they read state the services keep
  (cheap), or ask a store that is safe to ask from any thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

#: a check returns None when all is well, else why not
Check = Callable[[], str | None]


class Health:
    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()

    def add(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks[name] = check

    def remove(self, name: str) -> None:
        with self._lock:
            self._checks.pop(name, None)

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """(ready, check -> "ok" or its reason); a check that raises is not ready."""
        with self._lock:
            checks = list(self._checks.items())
        results: dict[str, str] = {}
        for name, check in checks:
            try:
                problem = check()
            except Exception as exc:  # a failing check means not ready, never a crashed endpoint
                problem = f"{type(exc).__name__}: {exc}"
            results[name] = "ok" if problem is None else problem
        return bool(checks) and all(v == "ok" for v in results.values()), results


def _answer(start_response: Callable[..., Any], status: str, body: dict[str, Any]) -> Iterable[bytes]:
    data = json.dumps(body, sort_keys=True).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def with_health(app: Callable[..., Iterable[bytes]], health: Health) -> Callable[..., Iterable[bytes]]:
    """A WSGI app that answers ``/healthz`` and ``/readyz`` and hands every other path to ``app``."""

    def routed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _answer(start_response, "200 OK", {"alive": True})
        if path == "/readyz":
            ready, checks = health.readiness()
            return _answer(
                start_response, "200 OK" if ready else "503 Service Unavailable", {"ready": ready, "checks": checks}
            )
        return app(environ, start_response)

    return routed
