"""Records over the limit are refused at every producer, with a clear error, before the client sees them
(issue 10, finding 1): the publisher, the CLI, the gateway, memory import through the bus, the bench helpers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import RecordTooLarge, record_size
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.replay import publish
from ctxbus.bench.replay_events import Record
from ctxbus.cli.memory_cmds import import_through_bus
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.observability import Metrics
from ctxbus.settings import GatewaySettings, HookSettings, KafkaSettings, Settings
from ctxbus.wiring import run_gateway

from .kafka_io import read_all
from .slack import LOAD_FACTOR, ROOMY_HOOK_MS
from .test_hooks import make_repo, prompt_input

pytestmark = pytest.mark.integration

LIMIT = 1_048_576


def big_request(prompt_chars: int = 100_000, files: int = 200) -> Envelope[RetrievalRequested]:
    """A request over 1 MiB: a long prompt and 200 mentioned files of 5,000 characters."""
    payload = RetrievalRequested(
        agent_name="test",
        prompt="p" * prompt_chars,
        trigger=Trigger.USER_PROMPT,
        mentioned_files=tuple(f"{i:04d}" + "/f" * 2_498 for i in range(files)),
    )
    return Envelope.root(payload, project="p", session_id="s", producer="test")


async def test_the_publisher_refuses_a_record_over_the_limit_before_the_client_and_stays_usable(
    kafka: KafkaClientConfig, topics: Topics
) -> None:
    async with EventPublisher(kafka, "t") as pub:
        with pytest.raises(RecordTooLarge) as refused:
            await pub.publish(topics.retrieval_requested, big_request())
        message = str(refused.value)
        assert f"a record for {topics.retrieval_requested} is 1,1" in message
        assert "over the limit of 1,048,576 bytes (CTXBUS_KAFKA_MAX_RECORD_BYTES); it was not sent" in message
        assert refused.value.size > LIMIT and refused.value.limit == LIMIT
        with pytest.raises(RecordTooLarge):
            await pub.publish_raw(topics.retrieval_requested, b"x" * LIMIT, None, [])

        # a record of exactly the limit goes through the client and the broker; one byte more does not
        headers = [("h", b"v")]
        size = LIMIT - record_size(b"k", b"", headers)
        while record_size(b"k", b"x" * size, headers) > LIMIT:
            size -= 1
        assert record_size(b"k", b"x" * size, headers) == LIMIT
        await pub.publish_raw(topics.retrieval_requested, b"x" * size, b"k", headers)
        with pytest.raises(RecordTooLarge):
            await pub.publish_raw(topics.retrieval_requested, b"x" * (size + 1), b"k", headers)
        small = big_request(prompt_chars=10, files=0)
        await pub.publish(topics.retrieval_requested, small)
    sent = await read_all(kafka, topics.retrieval_requested, expect=2)
    assert sorted(len(r.value) for r in sent)[-1] == size
    assert [EventDeserializer()(r.value).event_id for r in sent if len(r.value) < 1_000] == [small.event_id]


async def test_memory_import_through_the_bus_splits_what_one_record_cannot_hold(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics
) -> None:
    items = [
        MemoryItem(
            id=f"m{i}", project="acme/web", kind=MemoryKind.PATTERN, title=f"{i}", content=f"{i} " + "c" * 19_990
        )
        for i in range(60)
    ]
    sent = await import_through_bus(settings, "acme/web", items, wait=False, timeout_s=1)  # 1.2 MB of memories
    assert sent.items == 60 and sent.events >= 2
    records = await read_all(kafka, topics.memory_upserted, expect=2)
    assert len(records) >= 2 and all(record_size(r.key, r.value, list(r.headers)) <= LIMIT for r in records)
    events = sorted((EventDeserializer()(r.value) for r in records), key=lambda e: e.emitted_at)
    got = [item.id for e in events for item in e.payload.items]  # type: ignore[union-attr]
    assert sorted(got) == sorted(item.id for item in items) and len(got) == 60


def test_the_cli_prints_a_clear_error_for_a_record_over_the_limit(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(tmp_path / "data"),
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
    )
    errors = [arg for i in range(11) for arg in ("--error", f"{i} " + "e" * 100_000)]  # 1.1 MB of errors
    args = ["attempt", "record", "--task", "t1", "--attempt", "1", "--provider", "p", "--status", "failed", *errors]
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"ctxbus: error: a record for {topics.attempt_recorded} is 1,1"), done.stderr
    assert "over the limit of 1,048,576 bytes" in done.stderr and "Traceback" not in done.stderr
    assert asyncio.run(read_all(kafka, topics.attempt_recorded, expect=0, timeout_s=1)) == []


async def test_the_gateway_answers_from_the_pattern_file_when_a_request_is_over_the_limit(
    settings: Settings, topics: Topics, tmp_path: Path
) -> None:
    """With the smallest limit a 100,000-character prompt does not fit: the hook gets the file fallback at once."""
    BUDGET_MS = ROOMY_HOOK_MS  # noqa: N806  (a long budget: not waiting for it shows even on a busy machine)
    low = settings.model_copy(
        update={
            "kafka": KafkaSettings(**{**settings.kafka.model_dump(), "max_record_bytes": 65_536}),
            "gateway": GatewaySettings(port=0),
            "hook": HookSettings(timeout_ms=BUDGET_MS),
        }
    )
    config = KafkaClientConfig(low.kafka, low.kafka.bootstrap_servers, embedded=True)
    repo = make_repo(tmp_path)
    metrics, stop, ports = Metrics(), asyncio.Event(), []
    task = asyncio.create_task(run_gateway(low, config, metrics, stop, on_ready=ports.append))
    try:
        while not ports:
            await asyncio.sleep(0.05)

        def post() -> tuple[dict[str, Any], float]:
            body = prompt_input(repo, prompt="password reset " + "x" * 100_000)
            secret = read_secret({}, str(low.data_dir))  # the installation's, made by the gateway
            headers = {"Authorization": f"Bearer {secret}"}
            req = urllib.request.Request(f"http://127.0.0.1:{ports[0]}/v1/hooks", data=body, headers=headers)
            started = time.monotonic()
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read()), time.monotonic() - started

        answer, elapsed = await asyncio.to_thread(post)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert "Password reset revokes sessions" in answer["hookSpecificOutput"]["additionalContext"]
    # far below the budget, even with the test's slack on a busy machine: nothing was sent, nothing waited for
    assert elapsed < BUDGET_MS / 1000 / (2 * LOAD_FACTOR), elapsed
    assert metrics.gateway_requests.labels("UserPromptSubmit", "oversize_fallback")._value.get() == 1
    assert await read_all(config, topics.retrieval_requested, expect=0, timeout_s=1) == []


async def test_the_bench_publisher_refuses_a_record_over_the_limit(kafka: KafkaClientConfig, topics: Topics) -> None:
    at_ms = int(datetime.now(UTC).timestamp() * 1000)
    with pytest.raises(RecordTooLarge, match="over the limit of 1,048,576 bytes"):
        await publish(kafka, [Record(topics.retrieval_requested, b"k", b"x" * 1_100_000, [], at_ms)])
    assert await read_all(kafka, topics.retrieval_requested, expect=0, timeout_s=1) == []
