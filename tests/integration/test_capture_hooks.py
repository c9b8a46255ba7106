"""Session capture end to end: Claude Code's hooks (a fresh `ctxbus hook ...` process each) against the real gateway,
broker, services and store. A session that fails a test, fixes it and passes it produces ONE learning (captured after
the Stop hook answered, through memory.upserted, again at SessionEnd without a second item), and a later session's
similar prompt gets that learning in its context."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.payloads import MemoryUpserted
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, VectorStore
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .kafka_io import read_all
from .slack import ROOMY_HOOK_MS
from .test_hooks import context_of, hook_env, make_repo, prompt_input, run_hook

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
FAIL = """..........F.                                                            [100%]
=================================== FAILURES ===================================
__________________________ test_reset_link_expires ____________________________
E       app.auth.errors.TokenExpired: reset token expired 2 hours early
acme/auth/reset.py:42: TokenExpired
=========================== short test summary info ============================
FAILED tests/auth/test_reset.py::test_reset_link_expires - TokenExpired
1 failed, 11 passed in 0.61s"""
PASS = "............                                                            [100%]\n12 passed in 0.58s"


@pytest.fixture
async def stack(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[tuple[int, Path, VectorStore]]:
    repo = make_repo(tmp_path, PROJECT)
    (repo / "acme" / "auth").mkdir(parents=True)
    (repo / "acme" / "auth" / "reset.py").write_text("EXPIRY = timedelta(hours=24)\n")
    store = open_store(settings, embedder)
    gw_settings = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=ROOMY_HOOK_MS)}
    )
    metrics, stop, ready, ports = Metrics(), asyncio.Event(), asyncio.Event(), []
    resources = Resources(settings, metrics, embedder, store)
    services = asyncio.create_task(
        run_services(SERVICES, settings, kafka, metrics, stop, resources, on_ready=ready.set)
    )
    gateway = asyncio.create_task(run_gateway(gw_settings, kafka, metrics, stop, on_ready=ports.append))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        if gateway.done():  # it failed to start: say why instead of waiting for ever
            gateway.result()
        await asyncio.sleep(0.05)
    try:
        yield ports[0], repo, store
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)


class Session:
    """One Claude Code session: its transcript (real JSON-lines shapes) and its hook inputs."""

    def __init__(self, session_id: str, repo: Path, transcript: Path) -> None:
        self.session_id, self.repo, self.transcript = session_id, repo, transcript
        self.n = 0
        transcript.touch()

    def write(self, kind: str, content: Any, **extra: Any) -> None:
        self.n += 1
        entry = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.repo),
            "sessionId": self.session_id,
            "version": "2.0.27",
            "gitBranch": "main",
            "type": kind,
            "message": {"role": "user" if kind == "user" else "assistant", "content": content},
            "uuid": f"{self.session_id}-{self.n}",
            "timestamp": f"2026-11-27T10:00:{self.n:02d}.000Z",
            **extra,
        }
        with self.transcript.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def tool(self, tool_id: str, name: str, tool_input: dict[str, Any], text: str, result: Any, error: bool) -> None:
        self.write("assistant", [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}])
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}
        self.write("user", [block], toolUseResult=result)

    def hook(self, event: str, **fields: Any) -> bytes:
        base = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.repo),
            "hook_event_name": event,
        }
        return json.dumps({**base, **fields}).encode()


async def upserted_items(kafka: KafkaClientConfig, topics: Topics, expect: int) -> list[MemoryItem]:
    records = await read_all(kafka, topics.memory_upserted, expect=expect)
    events = [EventDeserializer()(r.value) for r in records]
    return [i for e in events if isinstance(e.payload, MemoryUpserted) for i in e.payload.items]


async def stored(store: VectorStore, until: Any) -> list[MemoryItem]:
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        items = store.items(PROJECT)
        if until(items) or asyncio.get_running_loop().time() > deadline:
            return items
        await asyncio.sleep(0.2)


async def test_a_fixed_failure_is_one_learning_and_a_later_similar_prompt_gets_it(
    stack: tuple[int, Path, VectorStore], tmp_path: Path, kafka: KafkaClientConfig, topics: Topics
) -> None:
    port, repo, store = stack
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS=str(ROOMY_HOOK_MS))
    s = Session("sess-fix", repo, tmp_path / "sess-fix.jsonl")

    async def hook(slug: str, stdin: bytes) -> dict[str, Any]:
        done, _ = await asyncio.to_thread(run_hook, env, slug, stdin, repo)
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    prompt = "password reset links expire too early, fix it"
    await hook("user-prompt-submit", s.hook("UserPromptSubmit", prompt=prompt))
    s.write("user", prompt)
    # the test fails twice (the same error), the fix, the test passes: each tool call also reaches PostToolUse
    for n in (1, 2):
        s.tool(
            f"toolu_f{n}", "Bash", {"command": "pytest tests/auth -q"}, f"Exit code 1\n{FAIL}", f"Error: {FAIL}", True
        )
        failure = s.hook(
            "PostToolUseFailure",
            tool_name="Bash",
            tool_input={"command": "pytest tests/auth -q"},
            tool_use_id=f"toolu_f{n}",
            error=f"Exit code 1\n{FAIL}",
        )
        assert await hook("post-tool-use-failure", failure) == {}
    edit = {"file_path": str(repo / "acme/auth/reset.py"), "old_string": "hours=24", "new_string": "hours=24, tz=UTC"}
    s.tool("toolu_e", "Edit", edit, "The file has been updated.", {"filePath": edit["file_path"]}, False)
    assert (
        await hook("post-tool-use", s.hook("PostToolUse", tool_name="Edit", tool_input=edit, tool_use_id="toolu_e"))
        == {}
    )
    s.tool("toolu_p", "Bash", {"command": "pytest tests/auth -q"}, PASS, {"stdout": PASS, "stderr": ""}, False)
    s.write("assistant", [{"type": "text", "text": "Reset tokens now compare expiry in UTC; the auth tests pass."}])
    assert await hook("stop", s.hook("Stop", stop_hook_active=False)) == {}  # answered before capture ran

    # captured after the answer, through the bus: one learning (the error hit twice is one) and the episode
    items = await upserted_items(kafka, topics, expect=1)
    (learning,) = [i for i in items if i.kind is MemoryKind.LEARNING]
    assert learning.source == "captured" and learning.provenance is not None
    assert learning.provenance.session_id == "sess-fix" and learning.provenance.hook_event == "Stop"
    assert "TokenExpired" in learning.content and "reset.py" in learning.content and "hit 2 times" in learning.content
    assert learning.files[0].path == "acme/auth/reset.py" and learning.files[0].sha256 is not None
    in_store = await stored(store, lambda got: any(i.id == learning.id for i in got))
    assert [i.id for i in in_store if i.kind is MemoryKind.LEARNING] == [learning.id]

    # the session ends: captured again, nothing new is sent and the store still holds one learning
    assert await hook("session-end", s.hook("SessionEnd", reason="logout")) == {}
    await asyncio.sleep(1.0)
    assert len([i for i in await upserted_items(kafka, topics, expect=1) if i.kind is MemoryKind.LEARNING]) == 1
    assert [i.id for i in store.items(PROJECT) if i.kind is MemoryKind.LEARNING] == [learning.id]

    # a later session's similar prompt gets the learning
    later = "the password reset test fails with TokenExpired again after my change to the reset token expiry"
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo, later), repo)
    assert "TokenExpired" in context_of(done)
