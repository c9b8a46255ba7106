"""Between two lives of the embedded broker no Kafka client task of the old round survives (cli.up_broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ctxbus.cli.up_broker import reap_client_tasks


def _client_like() -> Callable[[], Coroutine[Any, Any, None]]:
    """A coroutine function whose code says it lives in the Kafka client's package (as a producer's sender's)."""
    namespace: dict[str, Any] = {"asyncio": asyncio}
    exec(
        compile("async def sender_routine():\n    await asyncio.sleep(3600)\n", "/site/aiokafka/sender.py", "exec"),
        namespace,
    )
    routine: Callable[[], Coroutine[Any, Any, None]] = namespace["sender_routine"]
    return routine


async def test_leftover_client_tasks_are_cancelled_and_nothing_else() -> None:
    leftovers = [asyncio.create_task(_client_like()()) for _ in range(3)]
    ours = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    assert await reap_client_tasks() == 3
    assert all(t.cancelled() for t in leftovers) and not ours.done()
    assert await reap_client_tasks() == 0
    ours.cancel()
