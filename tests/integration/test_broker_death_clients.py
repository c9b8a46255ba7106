"""Clients whose broker died stop cleanly (issue 27): ``ctxbus up`` stops its services when its embedded broker
dies, and aiokafka 0.14.0's ``consumer.stop()`` raised ``CancelledError`` when a fetch was sleeping its retry
backoff on the dead connection (fixed in ``ctxbus.adapters.kafka.client_fixes``)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.settings import KafkaSettings

from .quiet_ports import quiet_port

pytestmark = pytest.mark.integration


async def test_consumers_stop_without_an_error_after_their_broker_was_killed(tmp_path: Path) -> None:
    with EmbeddedBroker(quiet_port(), log_file=tmp_path / "broker.log") as broker:
        config = KafkaClientConfig(
            KafkaSettings(enable_idempotence=False, fetch_max_wait_ms=5), broker.bootstrap_servers, embedded=True
        )
        await ensure_topics(config, ["t.dies"], partitions=2, replication=1)
        producer = AIOKafkaProducer(**config.producer("test"))
        await producer.start()
        await producer.send_and_wait("t.dies", b"x", partition=0)
        await producer.stop()
        consumers = [AIOKafkaConsumer(**config.consumer(f"test-{i}", None)) for i in range(4)]
        for consumer in consumers:
            await consumer.start()
            consumer.assign([TopicPartition("t.dies", 0), TopicPartition("t.dies", 1)])
            await consumer.getmany(timeout_ms=200)
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGKILL)
        # each consumer keeps fetching (and failing) for a while, then is stopped as a service stops
        for round_ in range(len(consumers)):
            await asyncio.sleep(0.15 * (round_ + 1))
            await consumers[round_].getmany(timeout_ms=50)
            await consumers[round_].stop()  # raised CancelledError before the fix
        assert broker.exit_reason() == "killed by SIGKILL"
