"""Writing to ``__global__`` (the scope every project reads) needs an explicit flag (issue 10, finding 4):
``--global`` in ``ctxbus memory import``, ``allow_global=True`` in the Python API, and on the bus the marker
header only those flagged paths set: the store's owner refuses global items arriving without it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import StoredReplies, send_upserts
from ctxbus.api import Memory
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .test_service_process import service_env

pytestmark = pytest.mark.integration


def item(item_id: str, project: str) -> MemoryItem:
    return MemoryItem(id=item_id, project=project, kind=MemoryKind.PRINCIPLE, content=f"Principle {item_id}: be kind.")


async def test_the_store_owner_refuses_unmarked_global_items_from_the_bus(
    running_pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    store = running_pipeline.store
    assert store is not None
    upsert = {"project": "p", "session_id": "any-producer", "producer": "someone"}
    async with EventPublisher(kafka, "someone") as publisher, StoredReplies(kafka, topics.memory_stored) as replies:
        unmarked = [item("p-1", "p"), item("g-1", GLOBAL_PROJECT)]
        (event,) = await send_upserts(publisher, topics.memory_upserted, unmarked, replies=replies, **upsert)
        assert await replies.wait(30)
        answer = replies.answers[str(event.event_id)].payload
        assert [(r.id, r.action.value) for r in answer.results] == [("p-1", "added"), ("g-1", "rejected")]
        assert "__global__" in (answer.results[1].reason or "") and "--global" in (answer.results[1].reason or "")
        # the flagged paths set the marker on the record: then the global item is stored
        marked = [item("g-2", GLOBAL_PROJECT), item("p-2", "p")]
        (event,) = await send_upserts(
            publisher, topics.memory_upserted, marked, replies=replies, global_write=True, **upsert
        )
        assert await replies.wait(30)
        answer = replies.answers[str(event.event_id)].payload
        assert [(r.id, r.action.value) for r in answer.results] == [("g-2", "added"), ("p-2", "added")]
    assert await asyncio.to_thread(store.count, "p") == 2
    assert [i.id for i in await asyncio.to_thread(store.get, GLOBAL_PROJECT, ["g-1", "g-2"])] == ["g-2"]


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = service_env(settings)
    del env["CTXBUS_KAFKA_BOOTSTRAP_SERVERS"]  # no broker: the command opens the store itself
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_memory_import_writes_global_items_only_with_global(settings: Settings, tmp_path: Path) -> None:
    memories = tmp_path / "items.jsonl"
    memories.write_text(
        '{"id": "own", "kind": "principle", "content": "Validate tokens at every boundary."}\n'
        '{"id": "shared", "kind": "principle", "content": "Never log secrets.", "project": "global"}\n'
    )
    plain = cli(settings, "memory", "import", str(memories), "--project", "p")
    assert plain.returncode == 3, plain.stderr
    lines = [json.loads(line) for line in plain.stdout.splitlines()]
    assert "shared" in lines[0]["error"] and "--global" in lines[0]["error"]
    assert lines[-1]["imported"] == 1 and lines[-1]["rejected"] == 1
    flagged = cli(settings, "memory", "import", str(memories), "--project", "p", "--global")
    assert flagged.returncode == 0, flagged.stderr
    assert json.loads(flagged.stdout.splitlines()[-1])["rejected"] == 0
    with Memory.open(settings) as memory:
        assert memory.store.count(GLOBAL_PROJECT) == 1 and memory.store.count("p") == 1


def test_the_api_writes_global_items_only_with_allow_global(settings: Settings, tmp_path: Path) -> None:
    with Memory.open(settings) as memory:
        with pytest.raises(ValueError, match="allow_global=True"):
            memory.add([item("p-1", "p"), item("g-1", GLOBAL_PROJECT)])
        assert memory.store.count("p") == 0  # nothing of a refused batch is written
        memory.add([item("g-1", GLOBAL_PROJECT)], allow_global=True)
        assert memory.store.count(GLOBAL_PROJECT) == 1
        path = tmp_path / "g.jsonl"
        path.write_text('{"id": "g-2", "kind": "principle", "content": "Be kind.", "project": "__global__"}\n')
        with pytest.raises(ValueError, match="allow_global=True"):
            memory.add_file(path, project="p")
        memory.add_file(path, project="p", allow_global=True)
        assert memory.store.count(GLOBAL_PROJECT) == 2
