"""Services as real processes: a crash between produce and commit, and SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.settings import Settings

from .kafka_io import committed, read_all, wait_caught_up

pytestmark = pytest.mark.integration


def service_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=settings.kafka.bootstrap_servers,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_DATA_DIR=str(settings.data_dir),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_LOG_LEVEL="INFO",
        **extra,
    )
    return env


def start_service(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctxbus.cli.main", "run", name],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def completed_event(prompt: str) -> Envelope[RetrievalCompleted]:
    request = RetrievalRequested(agent_name="t", prompt=prompt, trigger=Trigger.USER_PROMPT)
    root = Envelope.root(request, project="p", session_id="s", producer="test")
    item = RankedItem(
        id="i1", project="p", kind="pattern", title="T", content="Do the thing", confidence=0.9, score=0.8
    )
    payload = RetrievalCompleted(
        request=request,
        request_emitted_at=root.emitted_at,
        items=(item,),
        retrieval_duration_ms=1.0,
        embedding_model="m",
    )
    return root.caused(payload, producer="test")


async def test_a_crash_after_producing_loses_nothing_and_duplicates_nothing(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    first, second = completed_event("one"), completed_event("two")
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(topics.retrieval_completed, first)
    crashing = start_service(
        "injector", service_env(settings, CTXBUS_SERVICE_FAULT_EXIT_AFTER_OUTPUTS="1"), tmp_path / "crash.log"
    )
    assert await asyncio.to_thread(crashing.wait, 60) == 137, (tmp_path / "crash.log").read_text()
    produced = await read_all(kafka, topics.context_injected, expect=1)
    assert len(produced) == 1
    group = f"{settings.topic_prefix}.injector"
    assert await committed(kafka, group, topics.retrieval_completed) == {}, "the crash happened before the commit"

    restarted = start_service("injector", service_env(settings), tmp_path / "restart.log")
    try:
        async with EventPublisher(kafka, "t") as pub:
            await pub.publish(topics.retrieval_completed, second)
        await wait_caught_up(kafka, group, topics.retrieval_completed, alive=lambda: restarted.poll() is None)
    finally:
        restarted.send_signal(signal.SIGTERM)
        await asyncio.to_thread(restarted.wait, 30)
    injected = [EventDeserializer()(r.value) for r in await read_all(kafka, topics.context_injected, expect=2)]
    assert sorted(e.causation_id for e in injected) == sorted([first.event_id, second.event_id])
    assert all(isinstance(e.payload, ContextInjected) and e.payload.item_ids == ("i1",) for e in injected)


async def test_sigterm_stops_cleanly_with_everything_committed(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    proc = start_service("injector", service_env(settings), tmp_path / "svc.log")
    group = f"{settings.topic_prefix}.injector"
    try:
        async with EventPublisher(kafka, "t") as pub:
            for i in range(5):
                await pub.publish(topics.retrieval_completed, completed_event(f"prompt {i}"))
        await wait_caught_up(kafka, group, topics.retrieval_completed, alive=lambda: proc.poll() is None)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
    log = (tmp_path / "svc.log").read_text()
    assert code == 0, log
    assert '"service_stopped"' in log
    # JSON log lines carry the ids of the event they are about
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    injected = [line for line in lines if line.get("event") == "injected"]
    assert len(injected) == 5
    assert all({"event_id", "correlation_id", "causation_id"} <= line.keys() for line in injected)
    assert len(await read_all(kafka, topics.context_injected, expect=5)) == 5
