"""The dashboard's memory view over ``ctxbus up``: the items as the stack's store holds them (with what learning
made of them), a session's outcome and the convictions it moved, and a forget from the page that needs the
gateway's secret and goes through the bus (the item is gone for the CLI too)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, async_playwright, expect

from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.memory_view import memory_view
from ctxbus.dashboard.server import DashboardServer
from ctxbus.hooks.wire import read_secret
from ctxbus.runtime import read_runtime
from ctxbus.settings import Settings

from . import test_dashboard
from .test_memory_forget import ITEMS, PROJECT, QUERY, ctxbus, listed_ids, ok
from .up_stack import Stack, stop_quietly

pytestmark = pytest.mark.integration


@pytest.fixture
async def chromium(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """A headless chromium as the dashboard's own browser tests start it."""
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(test_dashboard.CHROMIUM),
            headless=True,
            args=test_dashboard.CHROMIUM_FLAGS,
        )
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    up = Stack(tmp_path)
    up.start()
    yield up
    stop_quietly(up.proc)


@pytest.fixture
async def dashboard(stack: Stack) -> AsyncIterator[DashboardServer]:
    settings = Settings(data_dir=stack.data)
    server = DashboardServer(Aggregator(), port=0, memory=memory_view(settings))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def fetch(server: DashboardServer, path: str, body: object = None, token: str | None = None) -> tuple[int, Any]:
    def run() -> tuple[int, Any]:
        headers = {"X-Ctxbus-Token": token} if token else {}
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    return await asyncio.to_thread(run)


def prime(stack: Stack, session_id: str) -> dict[str, Any]:
    """A context for a named session, through the stack's gateway (learning then knows what it injected)."""
    runtime = read_runtime(Settings(data_dir=stack.data))
    secret = read_secret({}, str(stack.data))
    assert runtime is not None and secret
    body = {"project": PROJECT, "description": QUERY, "session_id": session_id}
    request = urllib.request.Request(
        f"http://127.0.0.1:{runtime.gateway_port}/v1/prime",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        document: dict[str, Any] = json.loads(resp.read())
    return document


async def until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 120
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


async def test_the_memory_view_shows_learning_and_forgets_with_the_secret(
    stack: Stack, dashboard: DashboardServer, tmp_path: Path
) -> None:
    memories = tmp_path / "memories.jsonl"
    memories.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    ok(stack, "memory", "import", str(memories), "--project", PROJECT)
    status, listed = await fetch(dashboard, f"/api/memory?project={PROJECT}")
    assert status == 200 and {r["id"] for r in listed["items"]} == {"reset", "migrate", "naming"}
    assert all(r["injections"] == 0 and r["last_injected"] is None for r in listed["items"])

    injected = prime(stack, "s-dash")
    assert "revoke every refresh token" in injected["context"]  # the reset convention was injected
    ok(stack, "outcome", "record", "--project", PROJECT, "--session", "s-dash", "--outcome", "failed")

    async def session_seen() -> dict[str, Any] | None:
        _, body = await fetch(dashboard, f"/api/memory/sessions?project={PROJECT}")
        return next((s for s in body["sessions"] if s["session_id"] == "s-dash" and s["changed"]), None)

    session = await until(session_seen, "the outcome's session with the items it counted for")
    assert session["outcome"] == "failed"
    moved = {c["id"]: c for c in session["changed"]}
    assert moved["reset"]["after"] < moved["reset"]["before"]  # a failure lowered its conviction
    _, listed = await fetch(dashboard, f"/api/memory?project={PROJECT}")
    reset = next(r for r in listed["items"] if r["id"] == "reset")
    assert reset["outcomes"]["failed"] == 1 and reset["injections"] == 1 and reset["last_injected"]
    assert reset["conviction"] == moved["reset"]["after"]

    body = {"project": PROJECT, "ids": ["naming"]}
    assert (await fetch(dashboard, "/api/memory/forget", body))[0] == 401
    assert (await fetch(dashboard, "/api/memory/forget", body, token="not-the-secret"))[0] == 403
    assert "naming" in listed_ids(stack)
    secret = read_secret({}, str(stack.data))
    status, answer = await fetch(dashboard, "/api/memory/forget", body, token=secret)
    assert status == 200 and answer["queued"] == ["naming"]

    async def forgotten() -> bool:
        _, now = await fetch(dashboard, f"/api/memory?project={PROJECT}")
        return {r["id"] for r in now["items"]} == {"reset", "migrate"}

    await until(forgotten, "the forget applied by the store's owner")
    gone = ctxbus(stack, "memory", "show", "naming", "--project", PROJECT)
    assert gone.returncode == 1 and "no memory item 'naming'" in gone.stderr


async def test_the_page_lists_the_items_and_forgets_one_with_the_secret(
    stack: Stack, dashboard: DashboardServer, chromium: BrowserContext, tmp_path: Path
) -> None:
    memories = tmp_path / "memories.jsonl"
    memories.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    ok(stack, "memory", "import", str(memories), "--project", PROJECT)
    page = chromium.pages[0] if chromium.pages else await chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"http://127.0.0.1:{dashboard.port}/memory")
    await expect(page.get_by_test_id("memory-item")).to_have_count(3, timeout=10_000)
    await page.get_by_test_id("memory-kind").select_option("warning")
    await expect(page.get_by_test_id("memory-item")).to_have_count(1, timeout=10_000)
    await page.get_by_test_id("memory-kind").select_option("")
    row = page.locator('tr[data-testid="memory-item"][data-id="naming"]')
    await row.get_by_test_id("memory-forget").click()  # no secret yet: nothing is sent
    await expect(page.get_by_test_id("memory-status")).to_contain_text("Enter the gateway's secret")
    await page.get_by_test_id("memory-secret").fill("wrong")
    await row.get_by_test_id("memory-forget").click()
    await expect(page.get_by_test_id("memory-status")).to_contain_text("Not forgotten")
    await page.get_by_test_id("memory-secret").fill(read_secret({}, str(stack.data)) or "")
    await row.get_by_test_id("memory-forget").click()
    await expect(page.get_by_test_id("memory-status")).to_contain_text("sent to the store's owner")
    await expect(page.get_by_test_id("memory-item")).to_have_count(2, timeout=60_000)  # reloaded once applied
    assert "naming" not in listed_ids(stack)
    assert errors == []
