"""The archiver keeps a snapshot of the groups' positions only once it read what the broker held when it took them
(issue 27: no acknowledged answer lost to a broker death). A service commits an input after its outputs are
acknowledged: a snapshot that skips the input while the archive lacks the output loses that answer when the broker
dies (the refill has no output, the restored position never reads the input again)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.archive.archiver import Archiver
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

pytestmark = [pytest.mark.integration]

TOPICS = Topics("positions")
GROUP = f"{TOPICS.prefix}.retriever"
TIMEOUT_S = 90.0


async def test_a_position_is_kept_only_once_the_archive_holds_the_outputs_before_it(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    # the archiver's fetches come back every 3 s: an output acknowledged just after one is unread for seconds
    lagging = KafkaSettings(enable_idempotence=False, doorbell=False, background_fetch_max_wait_ms=3_000)
    config = KafkaClientConfig(lagging, broker.bootstrap_servers, embedded=True)
    await ensure_topics(config, TOPICS.all(), partitions=1, replication=1, compacted=(TOPICS.schemas,))
    request, answer = TopicPartition(TOPICS.retrieval_requested, 0), TopicPartition(TOPICS.context_injected, 0)
    root = tmp_path / "archive"
    archiver = Archiver(config, TOPICS, root, flush_interval_s=0.1, offsets_interval_s=0.1)
    stop = asyncio.Event()
    task = asyncio.create_task(archiver.run(stop))
    producer = AIOKafkaProducer(**config.producer("test"))
    member = AIOKafkaConsumer(**config.consumer("test", GROUP))
    await producer.start()
    await member.start()
    try:
        await producer.send_and_wait(request.topic, b"request", partition=0)
        deadline = time.monotonic() + TIMEOUT_S
        while archiver.archived < 1:  # the archive read the request
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        # the service: its output acknowledged, then its input committed
        await producer.send_and_wait(answer.topic, b"answer", partition=0)
        member.assign([request])
        await member.commit({request: OffsetAndMetadata(1, "")})
        while True:  # every snapshot kept from now on must come with the output read
            assert time.monotonic() < deadline, "no snapshot of the position was kept"
            state = json.loads((root / "state.json").read_text()) if (root / "state.json").exists() else {}
            if state.get("groups", {}).get(GROUP, {}).get(f"{request.topic}:0", 0) >= 1:
                assert archiver.archived >= 2, "the position was kept while the archive lacked the answer"
                break
            await asyncio.sleep(0.005)
    finally:
        stop.set()
        await task
        await member.stop()
        await producer.stop()
