"""Who the gateway answers: local, non-browser callers holding the installation's secret.

Checked for every request, in this order, before the request is handled:

1. **No browser.** A request with an ``Origin`` header comes from a web page (browsers send it with every
   cross-origin request and every POST): 403. A page cannot then make the gateway do anything, whatever
   content type it posts (``text/plain`` included).
2. **A loopback Host.** ``Host`` must be ``127.0.0.1``, ``localhost`` or ``[::1]``, with the gateway's own port
   (or none), or an entry of ``CTXBUS_GATEWAY_ALLOWED_HOSTS``: a DNS-rebound name (``evil.example`` resolving
   to 127.0.0.1) is refused, 403.
3. **The secret.** ``Authorization: Bearer <secret>`` or ``X-Ctxbus-Token: <secret>``, compared in constant
   time; missing or wrong: 401. ``/healthz`` needs none (it tells nothing but "ok").
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

import structlog

from ctxbus.core.hosts import allowed_set, host_allowed
from ctxbus.gateway.http import Handler, HttpError, Request, Response
from ctxbus.hooks.wire import AUTHORIZATION, TOKEN_HEADER

log = structlog.get_logger("ctxbus.gateway")

#: paths answered without the secret
OPEN_PATHS = frozenset({"/healthz"})
SECRET_HINT = (
    "the gateway needs its secret: send 'Authorization: Bearer <secret>' (the secret is the file "
    "DATA_DIR/gateway.secret that `ctxbus up` made, or CTXBUS_GATEWAY_SECRET)"
)


def presented_secret(headers: dict[str, str]) -> str | None:
    """The secret a request carries (``Authorization: Bearer ...`` or ``X-Ctxbus-Token``), or None."""
    token = headers.get(TOKEN_HEADER)
    if token:
        return token.strip()
    scheme, _, credentials = headers.get(AUTHORIZATION, "").strip().partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


class Admission:
    """The three checks; ``port`` is the gateway's listening port (set once it listens)."""

    def __init__(self, secret: str, *, allowed_hosts: Iterable[str] = (), port: int | None = None) -> None:
        if not secret:
            raise ValueError("the gateway's secret is empty")
        self._secret = secret.encode("utf-8")
        self._allowed = allowed_set(allowed_hosts)
        self.port = port

    def _host_ok(self, host: str | None) -> bool:
        return host_allowed(host, port=self.port, allowed=self._allowed)

    def check(self, request: Request) -> None:
        """Raises HttpError (403, 401) for a request the gateway must not handle."""
        if "origin" in request.headers:
            raise HttpError(403, "requests from web pages (with an Origin header) are refused")
        if not self._host_ok(request.headers.get("host")):
            raise HttpError(
                403,
                f"Host {request.headers.get('host')!r} is not this gateway's loopback address "
                "(127.0.0.1, localhost or [::1] with its port; others: CTXBUS_GATEWAY_ALLOWED_HOSTS)",
            )
        if request.path in OPEN_PATHS:
            return
        presented = presented_secret(request.headers)
        if presented is None or not hmac.compare_digest(presented.encode("utf-8", "replace"), self._secret):
            raise HttpError(401, SECRET_HINT if presented is None else f"wrong secret; {SECRET_HINT}")

    def wrap(self, handler: Handler) -> Handler:
        """``handler`` behind the checks (a refused request is logged and answered, never handled)."""

        async def admitted(request: Request) -> Response:
            try:
                self.check(request)
            except HttpError as exc:
                log.warning("gateway_refused", path=request.path, status=exc.status, reason=str(exc))
                raise
            return await handler(request)

        return admitted
