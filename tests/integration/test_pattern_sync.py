"""SessionStart syncs a changed learned-pattern file (merged over the home file) into the store through the bus:
a real gateway, the real services and ``ctxbus hook session-start`` as Claude Code runs it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.api import Memory
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.gateway.sync_state import files_digest, state_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import Resources, run_gateway

from .kafka_io import read_all
from .slack import ROOMY_HOOK_MS, assert_within
from .test_hooks import PATTERNS, context_of, hook_env, make_repo, run_hook, timed_hook

pytestmark = pytest.mark.integration

HOME_PATTERNS = {
    "version": "1.0.0",
    "patterns": [
        {
            "pattern_id": "reset-revokes",  # the project's pattern of the same id wins
            "title": "HOME version, overridden",
            "description": "The home file's older wording of the reset pattern.",
            "confidence": 0.5,
        },
        {
            "pattern_id": "small-commits",
            "domain": "git",
            "title": "Small commits",
            "description": "Commit small, reviewable changes with messages that say why.",
            "confidence": 0.9,
        },
    ],
}


@contextlib.asynccontextmanager
async def gateway(
    settings: Settings, kafka: KafkaClientConfig, resources: Resources | None = None, **hook: object
) -> AsyncIterator[int]:
    """A real gateway on a free port (its port yielded); with ``resources``, the store's owner in its process."""
    gw = settings.model_copy(update={"gateway": GatewaySettings(port=0), "hook": HookSettings(**hook)})  # type: ignore[arg-type]
    stop, ports = asyncio.Event(), []
    task = asyncio.create_task(run_gateway(gw, kafka, Metrics(), stop, on_ready=ports.append, resources=resources))
    while not ports:
        assert not task.done(), task
        await asyncio.sleep(0.05)
    try:
        yield ports[0]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def session_start(repo: Path) -> bytes:
    return json.dumps(
        {"session_id": "s-1", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
    ).encode()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "learned_patterns.json").write_text(json.dumps(HOME_PATTERNS))
    monkeypatch.setenv("HOME", str(home))  # the gateway reads ~/.claude/learned_patterns.json
    return home


async def upserts(kafka: KafkaClientConfig, topics: Topics, expect: int) -> list[list[str]]:
    records = await read_all(kafka, topics.memory_upserted, expect=expect, timeout_s=5)
    return [[i.id for i in EventDeserializer()(r.value).payload.items] for r in records]  # type: ignore[union-attr]


async def test_a_changed_pattern_file_is_synced_once_and_searchable(
    running_pipeline: Resources,
    settings: Settings,
    kafka: KafkaClientConfig,
    topics: Topics,
    embedder: Embedder,
    home: Path,
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path, project="fresh/app")
    assert running_pipeline.store is not None and running_pipeline.store.count("fresh/app") == 0
    # a budget a busy machine keeps (client and gateway): the sync and the store's answer are asserted, not speed
    async with gateway(settings, kafka, timeout_ms=ROOMY_HOOK_MS) as port:
        env = hook_env(
            tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS=str(ROOMY_HOOK_MS)
        )
        env |= {"HOME": str(home)}
        done, elapsed, startup = await asyncio.to_thread(timed_hook, env, "session-start", session_start(repo), repo)
        first_context = context_of(done, "SessionStart")
        assert_within(elapsed, ROOMY_HOOK_MS / 1000, startup)  # the client's budget (and a fresh process)
        async with asyncio.timeout(30):  # the sync finishes in the background if the hook did not wait for it
            while running_pipeline.store.count("fresh/app") < 2:
                await asyncio.sleep(0.1)
        # the project's version won; the home-only pattern came along; both searchable
        memory = Memory(settings, embedder, running_pipeline.store, owns_store=False)
        (reset,) = running_pipeline.store.get("fresh/app", ["reset-revokes"])
        assert reset.title == PATTERNS["patterns"][0]["title"]  # type: ignore[index]
        assert (await memory.asearch("fresh/app", "small reviewable commits", k=1)).items[0].id == "small-commits"
        # the first session did not start empty: the store answered with a synced pattern
        (injected,) = [EventDeserializer()(r.value) for r in await read_all(kafka, topics.context_injected, expect=1)]
        assert injected.project == "fresh/app" and injected.payload.item_ids  # type: ignore[union-attr]
        assert set(injected.payload.item_ids) <= {"reset-revokes", "small-commits"}  # type: ignore[union-attr]
        assert "### Small commits" in first_context or "### Password reset revokes sessions" in first_context
        # unchanged files: nothing is sent again, not even by a restarted gateway
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
    async with gateway(settings, kafka, timeout_ms=ROOMY_HOOK_MS) as port:
        env["CTXBUS_GATEWAY_URL"] = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        assert await upserts(kafka, topics, expect=2) == [["reset-revokes", "small-commits"]]
        # a changed file is synced at the next session start
        changed = {
            "version": "1.0.0",
            "patterns": [
                *PATTERNS["patterns"],
                {  # type: ignore[list-item]
                    "pattern_id": "feature-flags",
                    "description": "Ship risky changes behind a feature flag that defaults to off.",
                    "confidence": 0.8,
                },
            ],
        }
        (repo / ".claude" / "learned_patterns.json").write_text(json.dumps(changed))
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        async with asyncio.timeout(30):
            while not running_pipeline.store.get("fresh/app", ["feature-flags"]):
                await asyncio.sleep(0.1)
    assert len(await upserts(kafka, topics, expect=2)) == 2
    (state,) = (settings.data_dir / "pattern-sync").glob("*.json")
    recorded = json.loads(state.read_text())
    assert recorded["project"] == "fresh/app" and recorded["patterns"] == 3 and recorded["replaced"] == 2
    assert recorded["digest"] == files_digest(
        repo / ".claude" / "learned_patterns.json", home / ".claude" / "learned_patterns.json"
    )


async def test_a_session_start_the_store_cannot_answer_yet_gets_the_pattern_file(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path, project="wiped/app")
    # recorded as synced, but the store holds nothing of the project (a new store, or a sync still on its way)
    path = state_file(settings.data_dir / "pattern-sync", "wiped/app")
    path.parent.mkdir(parents=True)
    digest = files_digest(repo / ".claude" / "learned_patterns.json", home / ".claude" / "learned_patterns.json")
    path.write_text(json.dumps({"project": "wiped/app", "digest": digest}))
    async with gateway(settings, kafka) as port:
        env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}") | {"HOME": str(home)}
        done, _ = await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
    context = context_of(done, "SessionStart")
    assert "### Password reset revokes sessions" in context and "### Small commits" in context


async def test_without_the_store_owner_session_start_answers_in_time_and_the_sync_is_retried(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path, project="lonely/app")
    async with gateway(settings, kafka) as port:  # no services: nobody answers
        # the client's budget is wider than the gateway's own 2 s wait (as above): the gateway's fallback answers
        env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS="5000")
        done, elapsed, startup = await asyncio.to_thread(
            timed_hook, env | {"HOME": str(home)}, "session-start", session_start(repo), repo
        )
        assert "### Password reset revokes sessions" in context_of(done, "SessionStart")  # the file fallback
        assert_within(elapsed, 5.0, startup)  # the hook's budget (and a fresh process)
        assert await upserts(kafka, topics, expect=1) == [["reset-revokes", "small-commits"]]
    assert not list((settings.data_dir / "pattern-sync").glob("*.json"))  # unconfirmed: tried again next time


async def test_an_unreadable_pattern_file_is_reported_once_and_nothing_is_sent(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path, project="broken/app")
    (repo / ".claude" / "learned_patterns.json").write_text("{not json")
    async with gateway(settings, kafka, timeout_ms=800) as port:
        env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS="800")
        done, _ = await asyncio.to_thread(
            run_hook, env | {"HOME": str(home)}, "session-start", session_start(repo), repo
        )
        context_of(done, "SessionStart")  # valid output all the same
    (state,) = (settings.data_dir / "pattern-sync").glob("*.json")
    assert "not valid JSON" in json.loads(state.read_text())["error"]
    assert await upserts(kafka, topics, expect=0) == []


def test_the_digest_sees_either_file_change_and_none_when_both_are_absent(tmp_path: Path) -> None:
    project, home = tmp_path / "p.json", tmp_path / "h.json"
    assert files_digest(project, home) is None
    project.write_text("{}")
    first = files_digest(project, home)
    home.write_text("{}")
    second = files_digest(project, home)
    project.write_text('{"patterns": []}')
    assert len({first, second, files_digest(project, home)}) == 3 and first is not None
