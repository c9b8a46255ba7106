"""`ctxbus mcp` as an agent's MCP client meets it: a client built from the official SDK lists and calls every tool and
reads every resource, over stdio (the server spawned as Claude Code spawns it) and over streamable HTTP (with the
gateway's secret; refused without it), against a real `ctxbus up`; every call leaves its event on the bus."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.mcpserver.tools import RESOURCE_URIS, TOOL_NAMES
from ctxbus.settings import KafkaSettings

from .kafka_io import read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PROJECT = "acme/web"
MEMORIES = [
    {
        "id": "p-validate",
        "kind": "principle",
        "title": "Validate tokens at API boundaries",
        "content": "Always validate tokens at API boundaries; never trust a token passed between internal services "
        "without checking its expiry.",
        "domains": ["auth"],
        "confidence": 0.92,
    },
    {
        "id": "l-oauth",
        "kind": "learning",
        "title": "OAuth2: integration tests first",
        "content": "Adding OAuth2 support went well when we started with integration tests that verify the whole "
        "login flow.",
        "domains": ["auth"],
        "outcome": "successful",
        "key_insight": "Start with integration tests to verify flow",
    },
    {
        "id": "w-expiry",
        "kind": "warning",
        "title": "Token expiry edge case",
        "content": "Token expiry edge case: a token valid before an async call may expire after it; check expiry "
        "before and after async operations.",
        "domains": ["auth"],
        "severity": "medium",
        "mitigation": "Check token expiry before and after async operations",
    },
]
UP_TIMEOUT_S = 120.0


def ctxbus(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """A real `ctxbus up` (embedded broker, store, gateway) holding the project's memories."""
    tmp = tmp_path_factory.mktemp("mcp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(CTXBUS_DATA_DIR=str(tmp / "data"), CTXBUS_SERVICE_METRICS_PORT="0", CTXBUS_GATEWAY_PORT="0")
    memories = tmp / "memories.jsonl"
    memories.write_text("".join(json.dumps(m) + "\n" for m in MEMORIES))
    imported = ctxbus(env, "memory", "import", str(memories), "--project", PROJECT)
    assert imported.returncode == 0, imported.stderr
    log = (tmp / "up.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "ctxbus.cli.main", "up"], env=env, stdout=log, stderr=log)
    runtime = tmp / "data" / "runtime.json"
    deadline = time.monotonic() + UP_TIMEOUT_S
    while not runtime.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / "up.log").read_text()
        time.sleep(0.1)
    try:
        yield env, json.loads(runtime.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def _result(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    structured: dict[str, Any] = result.structured_content
    return structured


async def call_everything(client: Client, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Lists and calls every tool and reads every resource; returns each tool's answer (checked)."""
    listed = await client.list_tools()
    assert sorted(t.name for t in listed.tools) == sorted(TOOL_NAMES)
    resources = await client.list_resources()
    assert sorted(str(r.uri) for r in resources.resources) == sorted(RESOURCE_URIS)
    run = uuid.uuid4().hex[:8]
    answers: dict[str, dict[str, Any]] = {}

    prime = _result(
        await client.call_tool(
            "prime_context",
            {"task_type": "feature", "domain": "auth", "description": "Add refresh-token rotation", "max_tokens": 800},
        )
    )
    assert {"task_context", "principles", "patterns", "learnings", "warnings", "suggested_approach"} <= set(prime)
    assert prime["task_context"]["task_type"] == "feature" and prime["task_context"]["domain"] == "auth"
    # (another run's remembered principle may still be on its way out: its forget is applied asynchronously)
    assert "p-validate" in [p["id"] for p in prime["principles"]]
    assert prime["token_count"] <= 800
    assert "Validate tokens at API boundaries" in prime["context"]
    answers["prime_context"] = prime

    searched = _result(await client.call_tool("search_memory", {"query": "token expiry after async calls"}))
    assert searched["items"][0]["id"] == "w-expiry" and searched["items"][0]["breakdown"]
    answers["search_memory"] = searched

    content = f"Run {run}: rotate refresh tokens on every use; reusing an old one revokes the whole token family."
    remembered = _result(
        await client.call_tool("remember", {"content": content, "kind": "principle", "title": f"Rotation {run}"})
    )
    assert remembered["stored"] is True and [r["action"] for r in remembered["results"]] == ["added"]
    found = _result(await client.call_tool("search_memory", {"query": f"Rotation {run}: rotate refresh tokens"}))
    assert remembered["id"] in [i["id"] for i in found["items"]]  # stored by the stack's store owner, searchable
    answers["remember"] = remembered

    task = f"task-{run}"
    attempt = await asyncio.to_thread(
        ctxbus,
        env,
        *("attempt", "record", "--project", PROJECT, "--task", task, "--attempt", "1", "--provider", "gemini"),
        *("--status", "failed", "--updated", "src/auth/token_service.py", "--error", "expiry not checked"),
        *("--exit-reason", "validation_failure"),
    )
    assert attempt.returncode == 0, attempt.stderr
    pre: dict[str, Any] = {}
    for _ in range(50):  # the injector's attempt recorder stores it shortly after it is published
        pre = _result(await client.call_tool("precontext", {"task_id": task, "description": "Add token rotation"}))
        if "token_service.py" in pre["context"]:
            break
        await asyncio.sleep(0.2)
    assert "token_service.py" in pre["context"] and "expiry not checked" in pre["context"], pre
    answers["precontext"] = pre

    outcome = _result(await client.call_tool("record_outcome", {"outcome": "successful", "notes": f"run {run}"}))
    assert outcome["via"] == "bus" and outcome["scope"] == "session" and outcome["session_id"].startswith("mcp-")
    answers["record_outcome"] = outcome

    principles = await client.read_resource("ctxbus://principles")
    assert "Validate tokens at API boundaries" in principles.contents[0].text  # type: ignore[union-attr]
    learnings = await client.read_resource("ctxbus://learnings")
    assert "OAuth2: integration tests first" in learnings.contents[0].text  # type: ignore[union-attr]

    forgot = _result(await client.call_tool("forget", {"ids": [remembered["id"]], "note": f"run {run}"}))
    assert forgot["forgotten"] == [remembered["id"]]
    answers["forget"] = forgot

    failed = await client.call_tool("prime_context", {"task_type": "no-such-type"})
    assert failed.is_error and "unknown task_type" in failed.content[0].text  # type: ignore[union-attr]
    return answers


async def assert_on_the_bus(runtime: dict[str, Any], answers: dict[str, dict[str, Any]]) -> None:
    """Every tool call left its event where dashboards and replay read: the retrieval chains' injections, the
    upsert, the outcome and the curation."""
    config = KafkaClientConfig(KafkaSettings(), runtime["bootstrap_servers"], embedded=True)
    topics = Topics(runtime["topic_prefix"])
    decode = EventDeserializer()

    async def events(topic: str) -> list[Any]:
        return [decode(r.value) for r in await read_all(config, topic, expect=1)]

    injected = {str(e.correlation_id) for e in await events(topics.context_injected)}
    for tool in ("prime_context", "search_memory", "precontext"):
        assert answers[tool]["correlation_id"] in injected, tool
    upserted = await events(topics.memory_upserted)
    assert answers["remember"]["event_id"] in {str(e.event_id) for e in upserted}
    assert all(e.producer.service == "mcp" for e in upserted if str(e.event_id) == answers["remember"]["event_id"])
    assert answers["record_outcome"]["event_id"] in {str(e.event_id) for e in await events(topics.outcome_recorded)}
    assert answers["forget"]["event_id"] in {str(e.event_id) for e in await events(topics.memory_curated)}


async def test_every_tool_over_stdio(stack: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, runtime = stack
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxbus.cli.main", "mcp", "--project", PROJECT], env=env
    )
    async with Client(params) as client:
        answers = await call_everything(client, env)
    await assert_on_the_bus(runtime, answers)


@asynccontextmanager
async def http_server(env: dict[str, str]) -> AsyncIterator[str]:
    """`ctxbus mcp serve --http` on a free port; yields its URL."""
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "ctxbus.cli.main", "mcp", "serve", "--http", "--port", "0", "--project", PROJECT),
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        match = re.search(r"http://\S+/mcp", line)
        assert match, line
        yield match.group(0)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_every_tool_over_http_with_the_secret_and_none_without(
    stack: tuple[dict[str, str], dict[str, Any]],
) -> None:
    env, runtime = stack
    secret = (Path(env["CTXBUS_DATA_DIR"]) / "gateway.secret").read_text().strip()
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}
    async with http_server(env) as url, httpx2.AsyncClient(timeout=60) as raw:
        refused = await raw.post(url, json=listing, headers=accept)
        assert refused.status_code == 401 and "secret" in refused.json()["error"]
        wrong = await raw.post(url, json=listing, headers={**accept, "authorization": "Bearer not-the-secret"})
        assert wrong.status_code == 401
        page = await raw.post(url, json=listing, headers={**accept, "authorization": f"Bearer {secret}", "origin": url})
        assert page.status_code == 403  # a web page, even holding the secret
        async with (
            httpx2.AsyncClient(headers={"authorization": f"Bearer {secret}"}, timeout=60) as authorised,
            Client(streamable_http_client(url, http_client=authorised)) as client,
        ):
            answers = await call_everything(client, env)
    await assert_on_the_bus(runtime, answers)


async def test_with_no_stack_the_stdio_server_answers_every_tool_with_an_error_and_keeps_serving(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env["CTXBUS_DATA_DIR"] = str(tmp_path / "data")  # no `ctxbus up` here
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxbus.cli.main", "mcp", "--project", PROJECT], env=env
    )
    async with Client(params) as client:
        for name in TOOL_NAMES:
            arguments = {
                "prime_context": {"task_type": "feature"},
                "search_memory": {"query": "token expiry"},
                "remember": {"content": "Rotate refresh tokens."},
                "forget": {"ids": ["w-expiry"]},
                "record_outcome": {"outcome": "failed"},
                "precontext": {"task_id": "t-1"},
            }[name]
            result = await client.call_tool(name, arguments)
            assert result.is_error and "start the stack with `ctxbus up`" in result.content[0].text  # type: ignore[union-attr]
        assert len((await client.list_tools()).tools) == len(TOOL_NAMES)  # still serving
