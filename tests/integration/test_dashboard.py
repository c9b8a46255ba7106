"""``ctxbus dashboard`` on the real broker, looked at in a real headless browser (Debian's chromium
driven by Playwright): events published during the test appear without a reload, empty injections
show their reason, dead letters and undecodable messages are shown and counted, and clients that
go away leave the server serving."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.dead_letter import dead_letter_headers
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench import dashboard as bench
from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    DeadLetter,
    RankedItem,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)
from ctxbus.contract.serde import EventSerializer
from ctxbus.contract.topics import Topics
from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.feed import DashboardFeed
from ctxbus.dashboard.server import DashboardServer, run_dashboard
from ctxbus.settings import Settings

from .kafka_io import committed, end_offsets, send_raw

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
#: NOTES.md: without the background-networking flags chromium floods the closed network
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SEEN_WITHIN_MS = 5_000


@dataclass
class Dashboard:
    server: DashboardServer
    feed: DashboardFeed
    task: asyncio.Task[None]
    stop: asyncio.Event

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/"

    async def snapshot(self, query: str = "") -> dict[str, Any]:
        def fetch() -> dict[str, Any]:
            with urllib.request.urlopen(f"{self.url}api/snapshot{query}", timeout=5) as resp:
                snap: dict[str, Any] = json.loads(resp.read())
                return snap

        return await asyncio.to_thread(fetch)

    async def until(self, predicate: Callable[[dict[str, Any]], bool], query: str = "") -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while True:
            snap = await self.snapshot(query)
            if predicate(snap):
                return snap
            assert time.monotonic() < deadline, f"the dashboard never showed it: {snap['totals']}"
            await asyncio.sleep(0.05)


@pytest.fixture
async def dashboard(kafka: KafkaClientConfig, topics: Topics) -> AsyncIterator[Dashboard]:
    stop = asyncio.Event()
    started: asyncio.Future[tuple[DashboardServer, DashboardFeed]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_dashboard(kafka, topics, stop, port=0, on_ready=lambda s, f: started.set_result((s, f)))
    )
    server, feed = await asyncio.wait_for(started, 10)
    await asyncio.wait_for(feed.ready.wait(), 10)
    try:
        yield Dashboard(server, feed, task, stop)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    if not await asyncio.to_thread(CHROMIUM.exists):
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium for the browser tests")
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh profile per test
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1440, "height": 1000},
        )
        try:
            yield context
        finally:
            await context.close()


async def open_page(browser: BrowserContext, dashboard: Dashboard, query: str = "") -> Page:
    page = browser.pages[0] if browser.pages else await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(dashboard.url + query)
    await expect(page.get_by_test_id("live-status")).to_have_text("live", timeout=SEEN_WITHIN_MS)
    assert not errors, errors
    return page


def injected(
    project: str,
    session: str,
    *,
    context: str = "### Password reset revokes sessions\nRevoke every refresh token after a reset.",
    empty_reason: str | None = None,
    trigger: Trigger = Trigger.USER_PROMPT,
) -> Envelope[ContextInjected]:
    """A context-injected event caused by a request emitted 42 ms before it."""
    now = datetime.now(UTC)
    request = Envelope.root(
        RetrievalRequested(agent_name="claude-code", prompt="Fix login after password reset", trigger=trigger),
        project=project,
        session_id=session,
        producer="test",
        now=now - timedelta(milliseconds=42),
    )
    payload = ContextInjected(
        context_source=ContextSource.RAG_QUERY if context else ContextSource.NONE,
        pattern_count=1 if context else 0,
        context_size_bytes=len(context.encode()),
        retrieval_duration_ms=17,
        agent_name="claude-code",
        trigger=trigger,
        context=context,
        context_chars=len(context),
        token_estimate=len(context) // 4,
        item_ids=("reset-revokes",) if context else (),
        empty_reason=empty_reason,
        assembly_duration_ms=0.8,
        request_emitted_at=request.emitted_at,
    )
    return request.caused(payload, producer="injector", now=now)


async def publish_dead_letter(kafka: KafkaClientConfig, topics: Topics, project: str) -> None:
    """A dead letter as the runner writes it: the original bytes, the reason in headers."""
    original = Envelope.root(
        RetrievalRequested(agent_name="claude-code", prompt="anything", trigger=Trigger.USER_PROMPT),
        project=project,
        session_id="s-dead",
        producer="test",
    )
    record = DeadLetter(
        original_topic=topics.retrieval_requested,
        original_partition=2,
        original_offset=41,
        consumer_group=f"{topics.prefix}.retriever",
        error_class="TimeoutError",
        error_message="retries_exhausted: the vector store did not answer",
        attempts=6,
        failed_at=datetime.now(UTC),
    )
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish_raw(topics.dead_letter, EventSerializer()(original), b"k", dead_letter_headers(record, None))


async def test_an_injection_published_now_appears_on_the_page_without_reload(
    dashboard: Dashboard,
    browser: BrowserContext,
    kafka: KafkaClientConfig,
    topics: Topics,
    settings: Settings,
    tmp_path: Path,
) -> None:
    page = await open_page(browser, dashboard)
    await expect(page.locator("#recent tbody tr.placeholder")).to_have_count(1)
    await page.evaluate("window.__sameDocument = true")

    full = injected("acme/web", f"sess-{uuid.uuid4().hex[:6]}")
    empty = injected("other/app", "sess-empty", context="", empty_reason="no_memories_in_project")
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.context_injected, full)
        await pub.publish(topics.context_injected, empty)
    await publish_dead_letter(kafka, topics, "acme/web")

    row = page.locator(f'#recent tbody tr[data-id="{full.event_id}"]')
    await expect(row).to_be_visible(timeout=SEEN_WITHIN_MS)
    for text in ("acme/web", full.session_id, "claude-code", "user_prompt", "17.0 ms", "0.80 ms"):
        await expect(row).to_contain_text(text)
    await expect(row.locator("td").nth(11)).to_have_text("42.0 ms")  # end to end: request -> injection
    await expect(page.get_by_test_id("kpi-injections")).to_have_text("2")
    # the empty injection and its reason, in its table and in the chart of reasons
    await expect(page.get_by_test_id("empty-injections")).to_contain_text("no_memories_in_project")
    await expect(page.get_by_test_id("empty-injections")).to_contain_text("other/app")
    await expect(page.get_by_test_id("empty-reasons")).to_contain_text("no_memories_in_project")
    # the dead letter, with the runner's reason and where it came from
    dead = page.get_by_test_id("dead-letters")
    await expect(dead).to_contain_text("retries_exhausted", timeout=SEEN_WITHIN_MS)
    await expect(dead).to_contain_text("TimeoutError")
    await expect(dead).to_contain_text("context.retrieval.requested.v1:2@41")
    await expect(page.get_by_test_id("kpi-dead")).to_have_text("1")
    # charts are drawn: bars in the per-minute chart, one per stage in the percentile chart
    assert await page.locator("#chart-minutes svg rect.bar-ok").count() >= 1
    assert await page.locator("#chart-minutes svg rect.bar-empty").count() >= 1
    assert await page.locator("#chart-minutes svg circle.dot-dead").count() >= 1
    assert await page.locator("#chart-stages svg rect.bar-p99").count() == 5
    assert await page.evaluate("window.__sameDocument === true"), "the page was reloaded"

    screenshot = tmp_path / "dashboard.png"
    await page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.stat().st_size > 20_000

    # filtered by project: only that project's rows, empties and dead letters
    await page.get_by_test_id("project-filter").select_option("other/app")
    await expect(page.locator(f'#recent tbody tr[data-id="{empty.event_id}"]')).to_be_visible()
    await expect(page.locator(f'#recent tbody tr[data-id="{full.event_id}"]')).to_have_count(0)
    await expect(page.get_by_test_id("kpi-injections")).to_have_text("1")
    await expect(page.get_by_test_id("kpi-dead")).to_have_text("0")
    assert "project=other%2Fapp" in page.url
    later = injected("other/app", "sess-later", trigger=Trigger.SESSION_START)
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.context_injected, later)
        await pub.publish(topics.context_injected, injected("acme/web", "sess-not-shown"))
    await expect(page.locator(f'#recent tbody tr[data-id="{later.event_id}"]')).to_be_visible(timeout=SEEN_WITHIN_MS)
    await expect(page.get_by_test_id("kpi-injections")).to_have_text("2")

    # the dashboard reads in its own group, never the services' ones, and keeps its offsets there
    group = dashboard.feed.status.group_id
    assert group == f"{settings.topic_prefix}.dashboard"
    await page.close()
    dashboard.stop.set()  # it commits its position when it stops
    await asyncio.wait_for(dashboard.task, 15)
    positions = {p: offset for p, offset in (await committed(kafka, group, topics.context_injected)).items() if offset}
    assert positions == await end_offsets(kafka, topics.context_injected)


async def test_undecodable_messages_are_skipped_counted_and_shown(
    dashboard: Dashboard, browser: BrowserContext, kafka: KafkaClientConfig, topics: Topics
) -> None:
    page = await open_page(browser, dashboard)
    await expect(page.get_by_test_id("kpi-skipped")).to_have_text("0")
    request = Envelope.root(
        RetrievalRequested(agent_name="a", prompt="p", trigger=Trigger.USER_PROMPT),
        project="acme/web",
        session_id="s",
        producer="test",
    )
    await send_raw(kafka, topics.context_injected, b"{'not': 'an avro event'}")  # foreign bytes
    await send_raw(kafka, topics.context_injected, EventSerializer()(request))  # a ctxbus event of the wrong type
    await send_raw(kafka, topics.dead_letter, b"a dead letter without its reason header")
    after = injected("acme/web", "s-after")  # and the feed goes on after them
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.context_injected, after)

    await expect(page.locator(f'#recent tbody tr[data-id="{after.event_id}"]')).to_be_visible(timeout=SEEN_WITHIN_MS)
    await expect(page.get_by_test_id("kpi-skipped")).to_have_text("3")
    skipped = page.get_by_test_id("skipped")
    for reason in ("undecodable", "unexpected_event_type", "no_dead_letter_header"):
        await expect(skipped).to_contain_text(reason)
    snap = await dashboard.snapshot()
    assert snap["totals"]["injections"] == 1 and snap["totals"]["dead_letters"] == 0
    by_reason = {(r["topic"], r["reason"]): r["count"] for r in snap["skipped"]["by_reason"]}
    assert by_reason == {
        (topics.context_injected, "undecodable"): 1,
        (topics.context_injected, "unexpected_event_type"): 1,
        (topics.dead_letter, "no_dead_letter_header"): 1,
    }


async def test_clients_that_go_away_do_not_break_the_server(
    dashboard: Dashboard, browser: BrowserContext, kafka: KafkaClientConfig, topics: Topics
) -> None:
    pages = [await open_page(browser, dashboard, "?project=acme/web")]
    pages.append(await browser.new_page())
    await pages[1].goto(dashboard.url)
    await expect(pages[1].get_by_test_id("live-status")).to_have_text("live", timeout=SEEN_WITHIN_MS)
    reader, writer = await asyncio.open_connection("127.0.0.1", dashboard.server.port)
    writer.write(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{dashboard.server.port}\r\n\r\n".encode())
    await reader.readuntil(b"event: snapshot")
    assert dashboard.server.clients == 3

    writer.transport.abort()  # a connection reset
    await pages[0].close()  # a tab closed
    deadline = time.monotonic() + 5
    while dashboard.server.clients != 1:
        assert time.monotonic() < deadline, f"{dashboard.server.clients} streams still open"
        await asyncio.sleep(0.05)

    event = injected("acme/web", "s-after-disconnects")
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.context_injected, event)
    await expect(pages[1].locator(f'#recent tbody tr[data-id="{event.event_id}"]')).to_be_visible(
        timeout=SEEN_WITHIN_MS
    )
    await browser.close()  # the whole browser goes
    deadline = time.monotonic() + 5
    while dashboard.server.clients or dashboard.server.connections:
        assert time.monotonic() < deadline, "connections of a closed browser are still open"
        await asyncio.sleep(0.05)
    assert not dashboard.task.done()
    snap = await dashboard.snapshot()
    assert snap["totals"]["injections"] == 1 and snap["feed"]["connected"] is True


def test_the_command_serves_the_page_and_stops_on_sigterm(settings: Settings, topics: Topics, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=settings.kafka.bootstrap_servers,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_DATA_DIR=str(settings.data_dir),
    )
    log = tmp_path / "dashboard.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbus.cli.main", "dashboard", "--port", str(port)], env=env, stderr=out
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=2) as resp:
                    snap = json.loads(resp.read())
                if snap["feed"]["connected"]:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        assert snap["feed"]["group_id"] == f"{settings.topic_prefix}.dashboard"
        assert snap["feed"]["topics"] == [topics.context_injected, topics.retrieval_completed, topics.dead_letter]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
            assert b"ctxbus" in resp.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
    assert code == 0, log.read_text()
    assert f"ctxbus dashboard: http://127.0.0.1:{port}/" in log.read_text()

    with socket.socket() as busy:  # a port in use is a clear error, not a traceback
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = subprocess.run(
            [sys.executable, "-m", "ctxbus.cli.main", "dashboard", "--port", str(busy.getsockname()[1])],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    assert taken.returncode == 1, taken.stderr
    assert "ctxbus: error: cannot listen on 127.0.0.1:" in taken.stderr and "Traceback" not in taken.stderr


def test_the_shipped_benchmark_runs_small() -> None:
    result = bench.run(events=20, rate=40.0, burst=300, bursts=1, clients=3)
    assert result["seen"] == 20 and result["lost"] == 0
    assert result["latency_ms"]["p50"] < result["target_ms"], result["latency_ms"]
    assert result["dashboard_total"] == result["published_total"] == 320
    assert result["load"]["bursts"][0]["counted"] is True
    assert result["disconnects"] == {"opened": 3, "reset": 3, "left_open": 0}
    assert result["dashboard_skipped"] == 0


async def test_topics_created_after_the_start_are_read_and_nothing_is_counted_twice(
    settings: Settings, kafka: KafkaClientConfig
) -> None:
    topics = Topics(settings.topic_prefix)  # nothing exists yet
    aggregator = Aggregator()
    feed = DashboardFeed(kafka, topics, aggregator, housekeeping_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))

    async def until(predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not predicate():
            assert time.monotonic() < deadline, (feed.status, aggregator.all.injections)
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(feed.ready.wait(), 10)
        assert feed.status.partitions == 0 and feed.status.connected
        await ensure_topics(kafka, [topics.context_injected], partitions=3, replication=1)
        async with EventPublisher(kafka, "test") as pub:
            for i in range(4):
                await pub.publish(topics.context_injected, injected("acme/web", f"s{i}"))
        await until(lambda: aggregator.all.injections == 4)
        # a second topic appears: the assignment grows, the partitions read so far keep their place
        await ensure_topics(kafka, [topics.dead_letter], partitions=2, replication=1)
        await publish_dead_letter(kafka, topics, "acme/web")
        await until(lambda: aggregator.all.dead_letter_count == 1)
        assert feed.status.partitions == 5
        async with EventPublisher(kafka, "test") as pub:
            await pub.publish(topics.context_injected, injected("acme/web", "s-last"))
        await until(lambda: aggregator.all.injections >= 5)
        await asyncio.sleep(0.6)  # a few more housekeeping rounds
        assert aggregator.all.injections == 5 and aggregator.all.dead_letter_count == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def completed_for(
    injection: Envelope[ContextInjected], items: tuple[RankedItem, ...], prompt: str
) -> Envelope[RetrievalCompleted]:
    """The retrieval-completed event of ``injection``'s chain (same correlation id), as the retriever writes it."""
    request = RetrievalRequested(agent_name="claude-code", prompt=prompt, trigger=Trigger.USER_PROMPT)
    payload = RetrievalCompleted(
        request=request,
        request_emitted_at=injection.emitted_at - timedelta(milliseconds=42),
        items=items,
        candidates_considered=12,
        retrieval_duration_ms=17.0,
        embedding_model="all-MiniLM-L6-v2",
        profile="reviewer",
        task_type=TaskType.BUGFIX,
        task_type_confidence=0.83,
        fingerprint="fp-inspect",
        domain="auth",
        domain_source="detected",
    )
    head = injection.model_dump(exclude={"payload"})
    head.update(event_id=uuid.uuid4(), event_type=EventType.RETRIEVAL_COMPLETED, schema_version=3)
    return Envelope[RetrievalCompleted](**head, payload=payload)


async def test_a_row_opens_the_injection_with_its_items_and_why_they_ranked(
    dashboard: Dashboard, browser: BrowserContext, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    """Issue 12: "why did my agent get this?" - the request, the profile, each item's score breakdown, the text."""
    page = await open_page(browser, dashboard)
    shown = injected("acme/web", f"sess-{uuid.uuid4().hex[:6]}")
    kept = RankedItem(
        id="reset-revokes",
        project="acme/web",
        kind="learning",
        title="Password reset revokes sessions",
        content="Revoke every refresh token after a reset.",
        confidence=0.9,
        score=0.812,
        breakdown={"similarity": 0.93, "lexical": 0.41, "domain": 1.0, "total": 0.812},
        collapsed_ids=("reset-revokes-copy",),
    )
    left_out = RankedItem(
        id="n-plus-one",
        project="acme/web",
        kind="warning",
        title="N+1 queries",
        content="Batch the loads.",
        confidence=0.5,
        score=0.21,
        breakdown={"similarity": 0.31, "total": 0.21},
    )
    prompt = "Fix login after password reset " + "x" * 2_500
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.retrieval_completed, completed_for(shown, (kept, left_out), prompt))
        await pub.publish(topics.context_injected, shown)
    row = page.locator(f'#recent tbody tr[data-id="{shown.event_id}"]')
    await expect(row).to_be_visible(timeout=SEEN_WITHIN_MS)
    await row.click()
    panel = page.get_by_test_id("inspector")
    await expect(panel).to_be_visible()
    await expect(panel).to_contain_text(str(shown.correlation_id))
    await expect(page.get_by_test_id("inspector-prompt")).to_contain_text("Fix login after password reset")
    await expect(page.get_by_test_id("inspector-prompt")).to_contain_text("chars]")  # the prompt is truncated
    for text in ("reviewer", "bugfix (0.83)", "auth (detected)", "fp-inspect"):
        await expect(panel).to_contain_text(text)
    items = page.get_by_test_id("inspector-items")
    await expect(items.locator("tbody tr")).to_have_count(2)
    await expect(items.locator("tbody tr").nth(0)).to_contain_text("similarity 0.930")
    await expect(items.locator("tbody tr").nth(0)).to_contain_text("near copies left out: reset-revokes-copy")
    await expect(items.locator("tbody tr").nth(1)).to_contain_text("left out")
    await expect(page.get_by_test_id("inspector-context")).to_contain_text("Revoke every refresh token")
    await page.screenshot(path=str(tmp_path / "inspector.png"), full_page=False)
    await page.get_by_test_id("inspector-close").click()
    await expect(panel).to_be_hidden()
    # the JSON behind it, and a clear 404 for a chain the dashboard does not keep
    doc = await asyncio.to_thread(_get_json, f"{dashboard.url}api/injection?id={shown.correlation_id}")
    assert [i["injected"] for i in doc["retrieval"]["items"]] == [True, False] and doc["missing"] == []
    with pytest.raises(urllib.error.HTTPError) as missing:
        await asyncio.to_thread(_get_json, f"{dashboard.url}api/injection?id={uuid.uuid4()}")
    assert missing.value.code == 404


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
        return doc


async def test_history_read_at_start_is_not_counted_as_the_dashboard_s_own_delay(
    kafka: KafkaClientConfig, topics: Topics
) -> None:
    """Issue 12: backlog events read at start showed as 637 s "to dashboard"."""
    old = injected("acme/web", "sess-old")
    old = old.model_copy(update={"emitted_at": old.emitted_at - timedelta(minutes=10)})
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.context_injected, old)
    stop = asyncio.Event()
    started: asyncio.Future[tuple[DashboardServer, DashboardFeed]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_dashboard(kafka, topics, stop, port=0, on_ready=lambda s, f: started.set_result((s, f)))
    )
    server, feed = await asyncio.wait_for(started, 10)
    try:
        board = Dashboard(server, feed, task, stop)
        snap = await board.until(lambda s: s["totals"]["injections"] == 1)
        assert snap["latency"]["stages"]["delivery"]["n"] == 0
        async with EventPublisher(kafka, "test") as pub:
            await pub.publish(topics.context_injected, injected("acme/web", "sess-live"))
        snap = await board.until(lambda s: s["totals"]["injections"] == 2)
        delivery = snap["latency"]["stages"]["delivery"]
        assert delivery["n"] == 1 and delivery["max"] < 60_000
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def test_rows_are_in_time_order_and_no_label_is_clipped(
    dashboard: Dashboard, browser: BrowserContext, kafka: KafkaClientConfig, topics: Topics
) -> None:
    """Issue 21: recent rows out of time order, and the empty reason clipped ("nothin…")."""
    now = datetime.now(UTC)
    events = []
    for seconds, reason in ((3, "nothing_relevant_enough"), (1, "no_memories_in_project"), (2, None)):
        event = injected("acme/web", f"s-{seconds}", context="" if reason else "### A\nB", empty_reason=reason)
        events.append(event.model_copy(update={"emitted_at": now - timedelta(seconds=10 - seconds)}))
    async with EventPublisher(kafka, "test") as pub:  # read in this order, not in time order
        for event in events:
            await pub.publish(topics.context_injected, event)
    page = await open_page(browser, dashboard)
    rows = page.locator("#recent tbody tr[data-id]")
    await expect(rows).to_have_count(3, timeout=SEEN_WITHIN_MS)
    newest_first = [str(e.event_id) for e in sorted(events, key=lambda e: e.emitted_at, reverse=True)]
    assert [await r.get_attribute("data-id") for r in await rows.all()] == newest_first
    empties = page.locator("#empties tbody tr[data-id]")
    assert [await r.get_attribute("data-id") for r in await empties.all()] == [newest_first[0], newest_first[2]]
    await expect(page.get_by_test_id("empty-reasons")).to_contain_text("nothing_relevant_enough")
    clipped = await page.evaluate(
        """() => [...document.querySelectorAll('.bar-row .name, td.reason')]
            .filter((e) => e.textContent && e.scrollWidth > e.clientWidth)
            .map((e) => e.textContent)"""
    )
    assert clipped == []
    for viewport in ({"width": 1024, "height": 800}, {"width": 1440, "height": 1000}):
        await page.set_viewport_size(viewport)
        assert (
            await page.evaluate(
                """() => [...document.querySelectorAll('.bar-row .name, td.reason')]
                .filter((e) => e.textContent && e.scrollWidth > e.clientWidth).length"""
            )
            == 0
        ), viewport
