"""Deadlines on the real broker with the real store and embedder: an expired request is answered at once
(``expired``) without any retrieval work, a backlog of stale requests does not delay a fresh one, the
injector expires a retrieval that finished too late, and the gateway answers within the hook's budget
when the pipeline is slow, with a deadline on the request it publishes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.adapters.kafka.runner import ConsumerRunner
from ctxbus.components import open_store, retriever_handler
from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import (
    ContextInjected,
    RankedItem,
    RetrievalCompleted,
    RetrievalRequested,
    Trigger,
)
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import EXPIRED, PROBE_AFTER_S, RETURN_MARGIN_S, LoadShedder, WorkEstimate
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchHit, SearchQuery, VectorStore
from ctxbus.retriever.expiry import RetrieverDeadlines
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .kafka_io import committed, read_all
from .slack import LOAD_FACTOR, ROOMY_HOOK_MS, assert_within
from .test_hooks import make_repo, prompt_input

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
#: the gateway's cap on a hook's budget: above every budget these tests send (each sends its own)
GATEWAY_HOOK_CAP_MS = ROOMY_HOOK_MS


class CountingStore:
    """The real store, with its searches counted and their query texts kept (and slowed down when a test asks)."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.searches = 0
        self.texts: set[str] = set()
        self.delay_s = 0.0
        self._lock = threading.Lock()

    def searched(self, prompt: str) -> bool:
        """Whether a request with this prompt was searched for (its query starts with the prompt)."""
        return any(t == prompt or t.startswith(prompt + "\n") for t in self.texts)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        with self._lock:
            self.searches += 1
            self.texts.add(query.text)
        time.sleep(self.delay_s)
        return self.inner.search(query)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Stack:
    store: CountingStore
    metrics: Metrics
    repo: Path
    gateway_port: int
    secret: str  # the one the gateway made in its data dir


@pytest.fixture
async def stack(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[Stack]:
    """The three services and the gateway in this loop, over a store holding the repo's pattern file."""
    repo = make_repo(tmp_path, PROJECT)
    real = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project=PROJECT).items, embedder, real)
    store = CountingStore(real)
    metrics, stop, ready = Metrics(), asyncio.Event(), asyncio.Event()
    resources = Resources(settings, metrics, embedder, cast(VectorStore, store))
    services = asyncio.create_task(
        run_services(SERVICES, settings, kafka, metrics, stop, resources, on_ready=ready.set)
    )
    ports: list[int] = []
    gw = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=GATEWAY_HOOK_CAP_MS)}
    )
    gateway = asyncio.create_task(run_gateway(gw, kafka, metrics, stop, on_ready=ports.append))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        await asyncio.sleep(0.05)
    try:
        secret = (settings.data_dir / "gateway.secret").read_text().strip()
        yield Stack(store, metrics, repo, ports[0], secret)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)


def request(prompt: str, deadline: datetime | None, session: str = "sess-1") -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="test", prompt=prompt, trigger=Trigger.USER_PROMPT, deadline=deadline)
    return Envelope.root(payload, project=PROJECT, session_id=session, producer="test")


def expired_count(metrics: Metrics, service: str, cause: str = "past_deadline") -> float:
    value = metrics.registry.get_sample_value("ctxbus_requests_expired_total", {"service": service, "cause": cause})
    return value or 0.0


async def decoded(kafka: KafkaClientConfig, topic: str, expect: int) -> list[Any]:
    decode = EventDeserializer()
    return [decode(r.value) for r in await read_all(kafka, topic, expect=expect, timeout_s=30)]


async def test_an_expired_request_is_answered_expired_without_touching_the_store(
    stack: Stack, kafka: KafkaClientConfig, topics: Topics
) -> None:
    req = request("Fix login after password reset", datetime.now(UTC) - timedelta(seconds=5))
    injected = await request_injection(kafka, topics, req, 30, client_id="test")

    p = injected.payload
    assert p.empty_reason == EXPIRED and p.context == "" and p.item_ids == ()
    (completed,) = await decoded(kafka, topics.retrieval_completed, 1)
    assert isinstance(completed.payload, RetrievalCompleted) and completed.correlation_id == req.correlation_id
    assert completed.payload.empty_reason == EXPIRED and completed.payload.items == ()
    assert completed.payload.retrieval_duration_ms == 0.0 and completed.payload.request.deadline == req.payload.deadline
    assert stack.store.searches == 0
    assert expired_count(stack.metrics, "retriever") == 1 and expired_count(stack.metrics, "injector") == 0

    # a request with time left, or with no deadline, is served as ever
    fresh = await request_injection(
        kafka,
        topics,
        request("Fix login after password reset", datetime.now(UTC) + timedelta(seconds=30)),
        30,
        client_id="test",
    )
    plain = await request_injection(kafka, topics, request("password reset sessions", None), 30, client_id="test")
    assert fresh.payload.item_ids == ("reset-revokes",) and plain.payload.item_ids == ("reset-revokes",)
    assert stack.store.searched("Fix login after password reset") and stack.store.searched("password reset sessions")


async def test_a_backlog_of_stale_requests_does_not_hold_up_a_fresh_one(
    stack: Stack, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    stale_at = datetime.now(UTC) - timedelta(seconds=1)
    burst = [request(f"password reset question {i}", stale_at, session=f"s-{i % 7}") for i in range(300)]
    async with EventPublisher(kafka, "test-burst") as publisher:
        await asyncio.gather(*(publisher.publish(topics.retrieval_requested, r) for r in burst))
    fresh = request("Fix login after password reset", datetime.now(UTC) + timedelta(seconds=20), session="s-3")
    injected = await request_injection(kafka, topics, fresh, 30, client_id="test")

    assert injected.payload.empty_reason is None and injected.payload.item_ids == ("reset-revokes",)
    assert stack.store.searched(fresh.payload.prompt)
    assert not any(stack.store.searched(r.payload.prompt) for r in burst)  # the stale ones cost no retrieval
    injections = await decoded(kafka, topics.context_injected, 301)
    by_correlation = {e.correlation_id: e.payload for e in injections}
    assert len(injections) == len(by_correlation) == 301  # each answered once
    assert all(by_correlation[r.correlation_id].empty_reason == EXPIRED for r in burst)
    assert expired_count(stack.metrics, "retriever") == 300
    # committed past all of them, as for any answered request (the true ends: the last offsets read)
    for group, topic in (("retriever", topics.retrieval_requested), ("injector", topics.retrieval_completed)):
        records = await read_all(kafka, topic, expect=301)
        ends = {r.partition: r.offset + 1 for r in sorted(records, key=lambda r: r.offset)}
        async with asyncio.timeout(30):
            while await committed(kafka, f"{settings.topic_prefix}.{group}", topic) != ends:
                await asyncio.sleep(0.2)


async def test_the_injector_expires_a_retrieval_that_finished_after_the_deadline(
    stack: Stack, kafka: KafkaClientConfig, topics: Topics
) -> None:
    req = request("Fix login after password reset", datetime.now(UTC) - timedelta(milliseconds=10))
    item = RankedItem(id="reset-revokes", project=PROJECT, kind="pattern", content="c", confidence=0.9, score=0.9)
    completed = req.caused(
        RetrievalCompleted(
            request=req.payload,
            request_emitted_at=req.emitted_at,
            items=(item,),
            retrieval_duration_ms=1_500.0,
            embedding_model="m",
        ),
        producer="retriever",
    )
    async with EventPublisher(kafka, "test-late") as publisher:
        await publisher.publish(topics.retrieval_completed, completed)
    (injected,) = await decoded(kafka, topics.context_injected, 1)
    assert isinstance(injected.payload, ContextInjected) and injected.correlation_id == req.correlation_id
    assert injected.payload.empty_reason == EXPIRED and injected.payload.context == ""
    assert injected.payload.item_ids == () and injected.payload.retrieval_duration_ms == 1_500
    assert expired_count(stack.metrics, "injector") == 1


def post_hook(stack: Stack, body: bytes, budget_ms: int) -> tuple[str, float]:
    """What the hook client does: POST the hook input with the secret and its remaining budget; the context and
    the wall time."""
    headers = {"X-Ctxbus-Timeout-Ms": str(budget_ms), "Authorization": f"Bearer {stack.secret}"}
    req = urllib.request.Request(
        f"http://127.0.0.1:{stack.gateway_port}/v1/hooks", data=body, method="POST", headers=headers
    )
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer = json.loads(resp.read())
    return answer["hookSpecificOutput"]["additionalContext"], time.monotonic() - started


async def test_the_gateway_answers_within_the_hook_budget_when_the_pipeline_is_slow(
    stack: Stack, kafka: KafkaClientConfig, topics: Topics
) -> None:
    budget_ms = 1_000
    # one retrieval takes far longer than the hook's whole budget, even with the test's slack on a busy machine:
    # a gateway that waited for the pipeline could not pass the check below
    slow_s = 2 * LOAD_FACTOR * budget_ms / 1000
    stack.store.delay_s = slow_s
    sent_at = datetime.now(UTC)
    calls = [
        asyncio.to_thread(post_hook, stack, prompt_input(stack.repo, f"password reset {i}"), budget_ms)
        for i in range(3)
    ]
    answers = await asyncio.gather(*calls)
    for context, elapsed in answers:
        assert_within(elapsed, budget_ms / 1000)  # within the budget the hook gave it
        assert "### Password reset revokes sessions" in context  # the pattern file's answer, not nothing
    outcomes = stack.metrics.registry.get_sample_value(
        "ctxbus_gateway_requests_total", {"event": "UserPromptSubmit", "outcome": "timeout_fallback"}
    )
    assert outcomes == 3

    # every request carries the deadline the gateway stops waiting at (less the answer's way back)
    requests = await decoded(kafka, topics.retrieval_requested, 3)
    for r in requests:
        deadline = r.payload.deadline
        assert deadline is not None and sent_at <= r.emitted_at < deadline
        assert deadline - r.emitted_at <= timedelta(milliseconds=budget_ms) - timedelta(seconds=RETURN_MARGIN_S)

    # the late answers come back expired and nobody waits for them: the router drops them. The retriever works on
    # at most the first (its search outlives every deadline, so the injector expires it); the others it answers
    # expired without searching (on a loaded machine the first may reach it too late to be searched at all)
    # (the gateway's 3 fallback answers reach the topic too, from its spool: issue 25)
    events = await decoded(kafka, topics.context_injected, 6)
    injections = [i for i in events if i.producer.service == "injector"]
    assert [i.payload.empty_reason for i in injections] == [EXPIRED] * 3
    fallbacks = [i for i in events if i.producer.service == "gateway"]
    assert sorted(str(i.correlation_id) for i in fallbacks) == sorted(str(r.correlation_id) for r in requests)
    assert {i.payload.context_source.value for i in fallbacks} == {"persistence_file"}
    searched = sum(stack.store.searched(f"password reset {i}") for i in range(3))
    assert searched <= 1
    assert expired_count(stack.metrics, "retriever") == 3 - searched
    assert expired_count(stack.metrics, "injector") == searched

    # the pipeline is fast again. The retriever's estimate still says a retrieval takes the slow search's seconds
    # (it would shed a request with less time left than that, as the one below), until a second without serving
    # anything: then it serves (and measures) again. The time left is still seconds: a busy machine answers in it
    stack.store.delay_s = 0.0
    await asyncio.sleep(PROBE_AFTER_S)
    left_ms = int(slow_s * 1000) - 500
    context, _ = await asyncio.to_thread(post_hook, stack, prompt_input(stack.repo), left_ms)
    assert "Password reset revokes sessions" in context
    injected = stack.metrics.registry.get_sample_value(
        "ctxbus_gateway_requests_total", {"event": "UserPromptSubmit", "outcome": "injected"}
    )
    assert injected == 1


async def test_ctxbus_request_sets_the_deadline_from_its_timeout(
    stack: Stack, settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(tmp_path / "cli"),
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=settings.kafka.bootstrap_servers,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ctxbus.cli.main", "request", "--project", PROJECT, "--timeout", "7", "password reset"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Password reset revokes sessions" in done.stdout
    (req,) = await decoded(kafka, topics.retrieval_requested, 1)
    assert req.payload.deadline == req.emitted_at + timedelta(seconds=7 - RETURN_MARGIN_S)


async def test_under_overload_the_oldest_requests_make_way_for_the_freshest(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> None:
    """The retriever's loop knows the backlog behind each request: with one retrieval taking about a second
    (as measured) and 6 s left, ten requests at once cannot all be served, so the oldest are answered at once
    (``overload``) and the freshest are served, each in time."""
    repo = make_repo(tmp_path, PROJECT)
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project=PROJECT).items, embedder, store)
    metrics = Metrics()
    shedder = LoadShedder(WorkEstimate(window=9), probe_after_s=600)
    for _ in range(9):
        shedder.served(1.0, now=time.monotonic())
    handler = RetrieverDeadlines(
        retriever_handler(settings, embedder, store, topics, metrics),
        topic=topics.retrieval_completed,
        embedding_model=embedder.model_id,
        metrics=metrics,
        clock=lambda: datetime.now(UTC),
        shedder=shedder,
    )
    async with EventPublisher(kafka, "test-overload") as publisher:
        runner = ConsumerRunner(
            name="retriever",
            config=kafka,
            topic=topics.retrieval_requested,
            group_id=f"{settings.topic_prefix}.retriever",
            handler=handler,
            publisher=publisher,
            dead_letter_topic=topics.dead_letter,
            expect_event_type=EventType.RETRIEVAL_REQUESTED,
            settings=settings.service,
            metrics=metrics,
            output_topics=(topics.retrieval_completed,),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        try:
            await asyncio.wait_for(runner.ready.wait(), 60)  # the group has given it its partitions
            deadline = datetime.now(UTC) + timedelta(seconds=6)
            burst = [request(f"password reset question {i}", deadline, session="one-partition") for i in range(10)]
            # at once (one produce request: the loop sees them together), in order, on the session's partition
            await asyncio.gather(*(publisher.publish(topics.retrieval_requested, r) for r in burst))
            completed = await decoded(kafka, topics.retrieval_completed, 10)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            store.close()

    by_correlation = {c.correlation_id: c for c in completed}
    shed = [by_correlation[r.correlation_id].payload.empty_reason == EXPIRED for r in burst]
    assert shed[0] and not shed[-1], shed
    assert shed == sorted(shed, reverse=True)  # the oldest make way: the served are the freshest
    assert expired_count(metrics, "retriever", "overload") == sum(shed)
    for r, was_shed in zip(burst, shed, strict=True):
        if not was_shed:  # each served one was answered before its deadline
            assert by_correlation[r.correlation_id].emitted_at < deadline
