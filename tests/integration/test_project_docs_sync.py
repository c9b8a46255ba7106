"""A fresh repository's CLAUDE.md is in the context of its first session, with no import; a section deleted from
it is retired at the next session start, and one that comes back is stored again. A real gateway, the real
services and ``ctxbus hook session-start`` as Claude Code runs it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .kafka_io import read_all
from .slack import ROOMY_HOOK_MS
from .test_hooks import context_of, hook_env, run_hook
from .test_pattern_sync import gateway, session_start
from .up_stack import Stack, stop_quietly

pytestmark = pytest.mark.integration

CLAUDE = """# Working on ledgerly

## Money
Never store amounts as floats: always use integer cents (`Money` in `ledger/money.py`).

## Where things are
HTTP handlers live in `ledger/http/`, the domain in `ledger/domain/`.
"""


def fresh_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".claude").mkdir()
    (root / ".claude" / "ctxbus.json").write_text(json.dumps({"project": "ledgerly/api"}))
    (root / "CLAUDE.md").write_text(CLAUDE)
    return root


async def test_claude_md_is_injected_at_the_first_session_start_and_a_deleted_section_retires(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    store = running_pipeline.store
    assert store is not None and store.count("ledgerly/api") == 0
    repo = fresh_repo(tmp_path)
    async with gateway(settings, kafka, timeout_ms=ROOMY_HOOK_MS) as port:
        env = hook_env(
            tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS=str(ROOMY_HOOK_MS)
        )
        done, _ = await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        context = context_of(done, "SessionStart")
        async with asyncio.timeout(30):  # the sync may finish after the hook's share of its budget
            while store.count("ledgerly/api") < 2:
                await asyncio.sleep(0.1)
        (money,) = store.get("ledgerly/api", ["CLAUDE#money"])
        assert money.kind.value == "principle" and money.source == "CLAUDE.md"
        (layout,) = store.get("ledgerly/api", ["CLAUDE#where-things-are"])
        assert layout.kind.value == "convention"
        if "integer cents" not in context:  # the hook's budget ran out before the store answered: the next one has it
            done, _ = await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
            context = context_of(done, "SessionStart")
        assert "integer cents" in context

        # the layout section is deleted: retired at the next session start, through the bus
        (repo / "CLAUDE.md").write_text(CLAUDE.split("## Where things are", maxsplit=1)[0])
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        async with asyncio.timeout(30):
            while store.get("ledgerly/api", ["CLAUDE#where-things-are"]):
                await asyncio.sleep(0.1)
        (curated,) = await read_all(kafka, topics.memory_curated, expect=1, timeout_s=10)
        event = EventDeserializer()(curated.value)
        assert event.payload.action.value == "forget" and event.payload.ids == ("CLAUDE#where-things-are",)  # type: ignore[union-attr]
        assert "CLAUDE.md" in (event.payload.note or "")  # type: ignore[union-attr]
        assert store.get("ledgerly/api", ["CLAUDE#money"])  # the rest stays

        # the section comes back: stored again (the sync retired it, so it may bring it back)
        (repo / "CLAUDE.md").write_text(CLAUDE)
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        async with asyncio.timeout(30):
            while not store.get("ledgerly/api", ["CLAUDE#where-things-are"]):
                await asyncio.sleep(0.1)


def commit_all(repo: Path) -> None:
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        who = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
        subprocess.run(["git", "-C", str(repo), *who, *args], check=True, capture_output=True)


def _ctxbus(env: dict[str, str], cwd: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def _listed(env: dict[str, str], cwd: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "memory", "list", "--json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        check=False,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return {json.loads(line)["id"] for line in done.stdout.splitlines() if line.strip()}


def test_memory_sync_reads_the_documents_with_no_stack_and_through_a_running_one(tmp_path: Path) -> None:
    repo = fresh_repo(tmp_path)  # its .claude/ctxbus.json names the project: no --project anywhere
    stack = Stack(tmp_path)
    first = _ctxbus(stack.env, repo, "memory", "sync")
    assert first["via"] == "store" and first["added"] == 2 and first["project"] == "ledgerly/api"
    again = _ctxbus(stack.env, repo, "memory", "sync")
    assert again == {"project": "ledgerly/api", "changed": False, "via": "store", "stale": {}, "fresh": []}
    assert _listed(stack.env, repo) == {"CLAUDE#money", "CLAUDE#where-things-are"}
    stack.start()  # now the stack owns the store: the sync goes through the bus
    try:
        (repo / "CLAUDE.md").write_text(CLAUDE.split("## Where things are", maxsplit=1)[0])
        second = _ctxbus(stack.env, repo, "memory", "sync")
        assert second["via"] == Topics().memory_upserted and second["retired"] == ["CLAUDE#where-things-are"]
        deadline = time.monotonic() + 60  # the store's owner applies the retirement from the bus
        while _listed(stack.env, repo) != {"CLAUDE#money"}:
            assert time.monotonic() < deadline, _listed(stack.env, repo)
            time.sleep(0.2)
    finally:
        stop_quietly(stack.proc)


async def test_deleting_a_named_file_marks_its_items_stale_at_the_next_session_start(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, tmp_path: Path
) -> None:
    store = running_pipeline.store
    assert store is not None
    repo = fresh_repo(tmp_path)
    (repo / ".git").rmdir()
    (repo / "ledger").mkdir()
    (repo / "ledger" / "money.py").write_text("class Money:\n    cents: int\n")
    commit_all(repo)
    async with gateway(settings, kafka, running_pipeline, timeout_ms=ROOMY_HOOK_MS) as port:
        env = hook_env(
            tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS=str(ROOMY_HOOK_MS)
        )
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        async with asyncio.timeout(30):
            while not store.get("ledgerly/api", ["CLAUDE#money"]):
                await asyncio.sleep(0.1)
        (money,) = store.get("ledgerly/api", ["CLAUDE#money"])
        assert [f.path for f in money.files] == ["ledger/money.py"] and money.files[0].commit and not money.stale
        (repo / "ledger" / "money.py").unlink()
        await asyncio.to_thread(run_hook, env, "session-start", session_start(repo), repo)
        async with asyncio.timeout(30):
            while not store.get("ledgerly/api", ["CLAUDE#money"])[0].stale:
                await asyncio.sleep(0.1)
        (marked,) = store.get("ledgerly/api", ["CLAUDE#money"])
        assert marked.stale == "deleted: ledger/money.py" and marked.stale_since is not None
        (layout,) = store.get("ledgerly/api", ["CLAUDE#where-things-are"])
        assert layout.stale is None  # names no file: never judged
