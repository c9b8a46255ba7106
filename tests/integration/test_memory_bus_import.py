"""``ctxbus memory import`` while the stack owns the store: through the bus, answered by ``memory.stored``.

The command runs in process (``main``, in a thread: it runs its own event loop) against the worker's broker,
with the services of ``running_pipeline`` owning the store, as ``ctxbus up`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import StoredReplies, send_upserts
from ctxbus.api import Memory
from ctxbus.cli.main import main
from ctxbus.components import open_store
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryAction, MemoryUpserted
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.memory.jsonl_file import parse_jsonl
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.runtime import RuntimeInfo
from ctxbus.settings import Settings
from ctxbus.wiring import Resources, run_services

from .kafka_io import read_all

pytestmark = pytest.mark.integration

TURNS = Path(__file__).resolve().parents[1] / "data" / "conversation_turns.jsonl"


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The CLI's environment pointing at this test's broker, topics and data dir, with a live runtime file.

    The store's owner runs in this test's process; the runtime file names a stand-in process whose command line
    says ctxbus, as the CLI checks (a recycled pid of another program is not a running stack)."""
    for name in [n for n in os.environ if n.startswith("CTXBUS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CTXBUS_TOPIC_PREFIX", settings.topic_prefix)
    monkeypatch.setenv("CTXBUS_KAFKA_BOOTSTRAP_SERVERS", settings.kafka.bootstrap_servers)
    monkeypatch.setenv("CTXBUS_KAFKA_ENABLE_IDEMPOTENCE", "false")
    monkeypatch.setenv("CTXBUS_KAFKA_FETCH_MAX_WAIT_MS", "5")
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "ctxbus-stack-stand-in"])
    try:
        info = RuntimeInfo(stand_in.pid, settings.kafka.bootstrap_servers, False, 0, 0, settings.topic_prefix, "now")
        info.write(settings.runtime_file)
        yield settings
    finally:
        stand_in.kill()
        stand_in.wait(10)


def run_cli(*args: str) -> tuple[int, list[dict[str, object]], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    # the services log to this process's stdout too: the command's lines are its JSON ones
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")], err.getvalue()


@pytest.mark.slow
async def test_importing_through_the_bus_waits_until_every_turn_is_searchable_and_reports_the_counts(
    running_pipeline: Resources, cli_env: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> None:
    total = len(TURNS.read_text().splitlines())
    code, lines, err = await asyncio.to_thread(run_cli, "memory", "import", str(TURNS), "--project", "chat")
    assert code == 0, (lines, err)
    summary = lines[-1]
    assert summary["via"] == topics.memory_upserted and summary["confirmed"] == total
    assert (summary["added"], summary["merged"], summary["rejected"], summary["imported"]) == (total, 0, 0, total)
    assert 0 < int(str(summary["clustered"])) < total  # near copies are kept, linked by their cluster
    # the answer came after the items were searchable: each is found by its own text, at once
    assert running_pipeline.store is not None
    memory = Memory(cli_env, embedder, running_pipeline.store, owns_store=False)
    missed = []
    for item in parse_jsonl(TURNS, project="chat").items:
        found = await memory.asearch("chat", item.content, k=3)
        if item.id not in [f.id for f in found.items]:
            missed.append(item.id)
    assert missed == []
    # one answer per upsert event, caused by it, with its correlation id
    (stored,) = await read_all(kafka, topics.memory_stored, expect=1)
    answer = EventDeserializer()(stored.value)
    assert answer.correlation_id != answer.causation_id and len(answer.payload.results) == total  # type: ignore[union-attr]


async def test_without_the_store_owner_the_wait_times_out_saying_how_many_are_confirmed(
    cli_env: Settings, topics: Topics, embedder: Embedder, tmp_path: Path
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "kind": "warning", "content": "Never log reset tokens"}\n')
    held = open_store(cli_env, embedder)  # the stack's store, with no memory consumer running
    try:
        code, lines, err = await asyncio.to_thread(
            run_cli, "memory", "import", str(items), "--project", "p", "--timeout", "1"
        )
    finally:
        held.close()
    summary = lines[-1]
    assert code == 4 and (summary["confirmed"], summary["pending"], summary["timed_out"]) == (0, 1, True)
    assert "confirmed 0 of 1 items" in err and "Traceback" not in err


@contextlib.asynccontextmanager
async def store_owner(settings: Settings, kafka: KafkaClientConfig, embedder: Embedder) -> AsyncIterator[Resources]:
    """The retriever's consumers (the store's owner) until the block ends, then stopped as on SIGTERM."""
    res = Resources(settings=settings, metrics=Metrics(), embedder=embedder, store=open_store(settings, embedder))
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_services(("retriever",), settings, kafka, Metrics(), stop, res, ready.set))
    await asyncio.wait_for(ready.wait(), 60)
    try:
        yield res
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_redelivery_and_a_restart_neither_duplicate_items_nor_answers(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> None:
    items = parse_jsonl(TURNS, project="chat").items[:40]
    upsert = {"project": "chat", "session_id": "memory-import", "producer": "test"}

    async def redeliver(publisher: EventPublisher, events: list[Envelope[MemoryUpserted]]) -> None:
        for event in events:  # the same events again, as a broker redelivers them
            await publisher.publish(topics.memory_upserted, event)

    async with store_owner(settings, kafka, embedder) as res, EventPublisher(kafka, "test") as publisher:
        async with StoredReplies(kafka, topics.memory_stored) as replies:
            events = await send_upserts(publisher, topics.memory_upserted, items, replies=replies, **upsert)
            assert await replies.wait(60)
        assert res.store is not None and res.store.count("chat") == 40
        await redeliver(publisher, events)
    # restarted: the owner learns from its answers what it already answered
    async with store_owner(settings, kafka, embedder) as res, EventPublisher(kafka, "test") as publisher:
        await redeliver(publisher, events)
        async with StoredReplies(kafka, topics.memory_stored) as replies:  # a new import of the same items
            again = await send_upserts(publisher, topics.memory_upserted, items, replies=replies, **upsert)
            assert await replies.wait(60)
        (answer,) = replies.answers.values()
        assert {r.action for r in answer.payload.results} == {MemoryAction.REPLACED}
        assert res.store is not None and res.store.count("chat") == 40
    answers = [EventDeserializer()(r.value) for r in await read_all(kafka, topics.memory_stored, expect=2)]
    assert sorted(str(a.causation_id) for a in answers) == sorted(str(e.event_id) for e in (*events, *again))
