"""The archiver's flush (fsync of every partition file) runs off the event loop: the services share the loop,
and a slow disk must not stall them."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from aiokafka import TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.archive.archiver import Archiver
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings


class SlowWriter:
    def __init__(self) -> None:
        self.thread: int | None = None

    def flush(self) -> None:
        self.thread = threading.get_ident()
        time.sleep(0.2)  # a slow fsync


async def test_flush_leaves_the_loop_free(tmp_path: Path) -> None:
    archiver = Archiver(KafkaClientConfig(KafkaSettings(), "127.0.0.1:9", embedded=True), Topics("t"), tmp_path)
    writer = SlowWriter()
    archiver._writers[TopicPartition("t.x", 0)] = writer  # type: ignore[assignment]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    await archiver._flush()
    ticker.cancel()
    assert writer.thread is not None and writer.thread != threading.get_ident()
    assert ticks >= 5  # the loop went on while the files were flushed
