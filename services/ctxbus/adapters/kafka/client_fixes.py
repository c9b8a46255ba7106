"""Two fixes to aiokafka 0.14.0 (pinned in pyproject), applied once when the Kafka adapter is imported.

A SCRAM server-final message that carries an RFC 5802 ``e=`` error (``e=invalid-proof``) instead of the server's
signature ``v=`` ended in ``KeyError: 'v'`` (``conn.py``, ``process_server_final_message``), a traceback past every
``except KafkaError``. The fixed check raises ``SaslAuthenticationFailed`` with the server's error, as a failed
SaslAuthenticate does, so the clients fail as for any refused login (and the CLI's probe names it).

A consumer stopped while its broker is down raised ``CancelledError`` out of ``consumer.stop()``: the fetcher's
``close`` cancels its pending fetch requests and awaits each, and a request that failed on the dead connection is
sleeping its retry backoff in an ``except KafkaError`` branch that does not catch the cancellation (``fetcher.py``,
``_proc_fetch_request``). The stop then ends half done, and a stack stopping because its broker died (``ctxbus
up``'s supervision) fell over with a traceback. The fixed ``close`` waits for the cancelled requests without
re-raising their cancellation; a cancellation of the caller itself still propagates.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import aiokafka
from aiokafka import conn
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.errors import SaslAuthenticationFailed

FIXED_VERSION = "0.14.0"


async def _close(self: Any) -> None:
    """``Fetcher.close`` of aiokafka 0.14.0, but the pending requests' own cancellation is not re-raised."""
    self._closed = True
    self._fetch_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await self._fetch_task
    for waiter in self._fetch_waiters:  # fail all pending fetchone/fetchall calls
        self._notify(waiter)
    pending = list(self._pending_tasks)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)


def _process_server_final_message(self: Any, server_final: str) -> None:
    """RFC 5802 ``server-final-message = (server-error / verifier)``: an error is a failed login."""
    params = dict(pair.split("=", 1) for pair in server_final.split(",") if "=" in pair)
    if "e" in params or "v" not in params:
        said = params.get("e", f"no verifier in {server_final!r}")
        raise SaslAuthenticationFailed(f"the broker answered the SCRAM exchange with the error {said!r}")
    if self._server_signature != base64.b64decode(params["v"].encode("utf-8")):
        raise SaslAuthenticationFailed("the broker's SCRAM signature is wrong (not the server it claims to be)")


def apply() -> bool:
    """Install the fix on the pinned version; False (nothing changed) on any other."""
    if aiokafka.__version__ != FIXED_VERSION:
        return False
    Fetcher.close = _close
    conn.ScramAuthenticator.process_server_final_message = _process_server_final_message
    return True


apply()
