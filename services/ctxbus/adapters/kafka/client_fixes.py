"""A fix to aiokafka 0.14.0 (pinned in pyproject), applied once when the Kafka adapter is imported.

A consumer stopped while its broker is down raised ``CancelledError`` out of ``consumer.stop()``: the fetcher's
``close`` cancels its pending fetch requests and awaits each, and a request that failed on the dead connection is
sleeping its retry backoff in an ``except KafkaError`` branch that does not catch the cancellation (``fetcher.py``,
``_proc_fetch_request``). The stop then ends half done, and a stack stopping because its broker died (``ctxbus
up``'s supervision) fell over with a traceback. The fixed ``close`` waits for the cancelled requests without
re-raising their cancellation; a cancellation of the caller itself still propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiokafka
from aiokafka.consumer.fetcher import Fetcher

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


def apply() -> bool:
    """Install the fix on the pinned version; False (nothing changed) on any other."""
    if aiokafka.__version__ != FIXED_VERSION:
        return False
    Fetcher.close = _close
    return True


apply()
