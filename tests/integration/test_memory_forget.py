"""Memory you can see and steer, on ``ctxbus up`` as a user runs it: ``ctxbus memory list|show|pin|forget`` go
through the running stack (the gateway to read, ``memory.curated`` to change), and a forgotten item never comes
back: not in search, not in an injected context, not from a re-import, not from an older upsert replayed on the
bus, and not after the stack restarts (the archive refills the broker). Only an explicit
``--allow-forgotten`` import brings it back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import StoredReplies
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, MemoryAction, MemoryUpserted, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import MemoryItem

from .kafka_io import read_all
from .up_stack import Stack, stop_quietly

pytestmark = pytest.mark.integration

PROJECT = "acme"
ITEMS = [
    {
        "id": "reset",
        "kind": "convention",
        "title": "Password reset must invalidate every session",
        "content": "When a user resets the password, revoke every refresh token and every open session.",
        "source": "team conventions",
    },
    {
        "id": "migrate",
        "kind": "warning",
        "title": "Migrations add nullable columns first",
        "content": "Add a new column as nullable, backfill it, and only then add the NOT NULL constraint.",
        "source": "team conventions",
    },
    {
        "id": "naming",
        "kind": "convention",
        "title": "Feature flags are named after the ticket",
        "content": "Name every feature flag after its ticket id, in lower case, like ff_web_1234.",
        "source": "wiki",
    },
]
QUERY = "revoke sessions and refresh tokens when the password is reset"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    up = Stack(tmp_path)
    up.start()
    yield up
    stop_quietly(up.proc)


def ctxbus(stack: Stack, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=stack.env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def ok(stack: Stack, *args: str, stdin: str | None = None) -> str:
    done = ctxbus(stack, *args, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def found(stack: Stack) -> list[str]:
    query = json.dumps({"id": "q", "query": QUERY})
    (line,) = ok(stack, "search", "--project", PROJECT, "--queries", "-", "--k", "10", stdin=query).splitlines()
    return [i["id"] for i in json.loads(line)["items"]]


def listed_ids(stack: Stack, *flags: str) -> set[str]:
    out = ok(stack, "memory", "list", "--project", PROJECT, "--json", *flags)
    return {json.loads(line)["id"] for line in out.splitlines() if line.strip()}


async def test_a_forgotten_item_never_comes_back(stack: Stack, tmp_path: Path) -> None:
    topics = Topics()
    memories = tmp_path / "memories.jsonl"
    memories.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    imported = json.loads(ok(stack, "memory", "import", str(memories), "--project", PROJECT).splitlines()[-1])
    assert imported["via"] == topics.memory_upserted and imported["added"] == 3
    assert listed_ids(stack) == {"reset", "migrate", "naming"}
    assert listed_ids(stack, "--kind", "warning") == {"migrate"}
    assert listed_ids(stack, "--source", "WIKI") == {"naming"}
    assert listed_ids(stack, "--stale") == set()
    assert found(stack)[0] == "reset"

    pinned = json.loads(ok(stack, "memory", "pin", "migrate", "--project", PROJECT))
    assert pinned["via"] == topics.memory_curated
    assert listed_ids(stack, "--pinned") == {"migrate"}
    shown = json.loads(ok(stack, "memory", "show", "migrate", "--project", PROJECT, "--json"))
    assert shown["pinned"] is True and shown["content"] == ITEMS[1]["content"]

    unknown = ctxbus(stack, "memory", "forget", "nope", "--project", PROJECT)
    assert unknown.returncode == 1 and "no memory item 'nope'" in unknown.stderr
    forgot = json.loads(ok(stack, "memory", "forget", "reset", "--project", PROJECT, "--note", "superseded by SSO"))
    assert forgot["via"] == topics.memory_curated
    gone = ctxbus(stack, "memory", "show", "reset", "--project", PROJECT)
    assert gone.returncode == 1 and "no memory item 'reset'" in gone.stderr
    assert "reset" not in found(stack) and listed_ids(stack) == {"migrate", "naming"}

    # a re-import of the same file: refused for the forgotten item, the others replaced
    again = ctxbus(stack, "memory", "import", str(memories), "--project", PROJECT)
    assert again.returncode == 3, again.stderr  # some items rejected
    lines = again.stdout.splitlines()
    assert json.loads(lines[-1])["rejected"] == 1 and json.loads(lines[-1])["replaced"] == 2
    assert any("reset" in line and "forgotten at" in line for line in lines[:-1])
    # an older upsert (made before the forget) replayed on the bus: refused as well
    old = Envelope.root(
        MemoryUpserted(items=(MemoryItem.model_validate({**ITEMS[0], "project": PROJECT}),)),
        project=PROJECT,
        session_id="memory-import",
        producer="test",
    )
    old = old.model_copy(update={"emitted_at": old.emitted_at - timedelta(hours=1)})
    async with EventPublisher(stack.kafka, "test") as publisher, StoredReplies(stack.kafka, topics.memory_stored) as r:
        r.expect(old)
        await publisher.publish(topics.memory_upserted, old)
        assert await r.wait(120)
        (result,) = r.answers[str(old.event_id)].payload.results
    assert result.action is MemoryAction.REJECTED and "forgotten" in (result.reason or "")
    assert "reset" not in found(stack)

    # a restart: the archive refills the broker, the store and the curation ledger are on disk
    stack.stop(signal.SIGTERM)
    stack.start()
    assert listed_ids(stack) == {"migrate", "naming"} and listed_ids(stack, "--pinned") == {"migrate"}
    assert "reset" not in found(stack)
    async with EventPublisher(stack.kafka, "test") as publisher:
        request = Envelope.root(
            RetrievalRequested(agent_name="t", prompt=QUERY, trigger=Trigger.USER_PROMPT),
            project=PROJECT,
            session_id="after-restart",
            producer="test",
        )
        await publisher.publish(topics.retrieval_requested, request)
    records = await read_all(stack.kafka, topics.context_injected, expect=1, timeout_s=120)
    (answer,) = [
        e for e in map(EventDeserializer(), (r.value for r in records)) if e.correlation_id == request.correlation_id
    ]
    assert isinstance(answer.payload, ContextInjected)
    assert "reset" not in answer.payload.item_ids and "revoke every refresh token" not in answer.payload.context

    # only an explicit re-add after the forget brings it back
    back = json.loads(
        ok(stack, "memory", "import", str(memories), "--project", PROJECT, "--allow-forgotten").splitlines()[-1]
    )
    assert back["rejected"] == 0
    assert found(stack)[0] == "reset" and "reset" in listed_ids(stack)
