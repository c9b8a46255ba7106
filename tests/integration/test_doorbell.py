"""The doorbell on the embedded broker: an idle consumer pauses its partitions; a publish rings it awake (in this
process, and across processes: a consumer in ``ctxbus up``'s child woken by a publish in its parent, the answer
back woken by the child's ring); a record from a producer that does not ring still arrives after the fallback.

A fallback of 600 s makes a ring the only way an answer can come within the tests' waits."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import ReplyRouter
from ctxbus.adapters.kafka.runner import ConsumerRunner
from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted
from ctxbus.contract.serde import EventSerializer
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.settings import Settings
from ctxbus.wiring import request_path_ring, request_path_warm

from .kafka_io import read_all, send_raw
from .test_runner import EchoHandler, a_request, make_runner

pytestmark = pytest.mark.integration

NEVER_MS = 600_000
WAIT_S = 60.0


def with_fallback(
    settings: Settings, fallback_ms: int, awake_ms: int | None = None
) -> tuple[Settings, KafkaClientConfig]:
    update: dict[str, int] = {"doorbell_fallback_ms": fallback_ms}
    if awake_ms is not None:
        update["doorbell_awake_ms"] = awake_ms
    kafka_settings = settings.kafka.model_copy(update=update)
    changed = settings.model_copy(update={"kafka": kafka_settings})
    return changed, KafkaClientConfig(kafka_settings, kafka_settings.bootstrap_servers, embedded=True)


async def asleep(runner: ConsumerRunner) -> None:
    """Until the runner has paused its partitions and its sleep's first check has answered (it found nothing and
    waits for a ring: a record published during that check would be found by it, not rung)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        consumer, quiet = runner._consumer, runner.quiet
        paused = consumer is not None and runner.ready.is_set() and consumer.assignment() and consumer.paused()
        if paused and (quiet is None or quiet.answered_at > 0):
            return
        assert time.monotonic() < deadline, "the runner never went to sleep"
        await asyncio.sleep(0.05)


async def router_asleep(router: ReplyRouter, deadline: float) -> None:
    """Until the reply reader has paused its partitions (before ``deadline``, monotonic seconds)."""
    while not router._consumer.paused():
        assert time.monotonic() < deadline, "the reply reader never went to sleep"
        await asyncio.sleep(0.02)


async def _running(runner: ConsumerRunner) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asleep(runner)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_a_publish_rings_a_sleeping_consumer_awake(settings: Settings, topics: Topics, metrics: Metrics) -> None:
    settings, kafka = with_fallback(settings, NEVER_MS)
    async with EventPublisher(kafka, "t") as pub:
        runner = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async for _ in _running(runner):
            await pub.publish(topics.retrieval_requested, a_request())
            out = await read_all(kafka, topics.retrieval_completed, expect=1, timeout_s=WAIT_S)
            assert len(out) == 1
            assert runner.quiet is not None and runner.quiet.woken["rung"] >= 1
            assert runner.quiet.woken["fallback"] == 0


async def test_a_ring_upstream_wakes_a_downstream_consumer_before_its_input_comes(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    settings, kafka = with_fallback(settings, NEVER_MS)
    async with EventPublisher(kafka, "t") as pub:
        runner = ConsumerRunner(
            name="downstream",
            config=kafka,
            topic=topics.retrieval_requested,
            group_id=f"{settings.topic_prefix}.downstream",
            handler=EchoHandler(topics),
            publisher=pub,
            dead_letter_topic=topics.dead_letter,
            expect_event_type=EventType.RETRIEVAL_REQUESTED,
            settings=settings.service,
            metrics=metrics,
            wake_on=(topics.memory_upserted,),
        )
        async for _ in _running(runner):
            bell = kafka.doorbell
            assert bell is not None and runner.quiet is not None
            bell.ring(topics.memory_upserted)  # as a publisher of the upstream topic does
            deadline = time.monotonic() + WAIT_S
            while runner.quiet.woken["rung"] < 1:
                assert time.monotonic() < deadline, "the upstream ring did not wake it"
                await asyncio.sleep(0.01)
            assert runner.quiet.woken["fallback"] == 0


async def test_without_a_ring_the_fallback_wait_still_delivers(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    settings, kafka = with_fallback(settings, 300)
    async with EventPublisher(kafka, "t") as pub:
        runner = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async for _ in _running(runner):
            # a producer that knows nothing of the doorbell (any Kafka client)
            request = a_request()
            await send_raw(kafka, topics.retrieval_requested, EventSerializer()(request), key=b"k")
            out = await read_all(kafka, topics.retrieval_completed, expect=1, timeout_s=WAIT_S)
            assert len(out) == 1
            quiet = runner.quiet
            assert quiet is not None and quiet.woken["rung"] == 0
            # found by a check after a fallback wait (or by the full wake that follows a few checks)
            assert quiet.woken["behind"] + quiet.woken["fallback"] >= 1


async def test_a_sleeping_consumer_s_checks_keep_it_ready_without_fetching(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    settings, kafka = with_fallback(settings, 300)
    async with EventPublisher(kafka, "t") as pub:
        runner = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async for _ in _running(runner):
            quiet = runner.quiet
            assert quiet is not None
            deadline = time.monotonic() + WAIT_S
            while quiet.woken["checked"] < 2:  # two checks after fallback waits, each slept on
                assert time.monotonic() < deadline, "the sleeping consumer never checked the broker"
                await asyncio.sleep(0.05)
            assert quiet.answered_at > 0.0  # a check is the broker's answer: /readyz needs no probe of its own
            assert runner.readiness() is None
            # a full wake still comes after a few checks (a batch a check cannot see is fetched then)
            while quiet.woken["fallback"] < 1:
                assert time.monotonic() < deadline, "no full wake after the checks"
                await asyncio.sleep(0.05)


async def test_the_gateway_s_arrival_ring_wakes_the_whole_request_path(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    """The ring the gateway sends when a hook arrives (before its request exists) wakes the retriever, the injector
    (it wakes on the requested topic) and the reply reader; with no fallback, only that ring can wake them."""
    settings, kafka = with_fallback(settings, NEVER_MS)
    async with EventPublisher(kafka, "t") as pub:
        retriever = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        injector = ConsumerRunner(
            name="injector-like",
            config=kafka,
            topic=topics.retrieval_completed,
            group_id=f"{settings.topic_prefix}.injector-like",
            handler=EchoHandler(topics),
            publisher=pub,
            dead_letter_topic=topics.dead_letter,
            expect_event_type=EventType.RETRIEVAL_COMPLETED,
            settings=settings.service,
            metrics=metrics,
            wake_on=(topics.retrieval_requested,),
        )
        async with ReplyRouter(kafka, topics.context_injected, wake_on=(topics.retrieval_requested,)) as router:
            quiet = router._quiet
            assert quiet is not None
            async for _ in _running(retriever):
                async for _ in _running(injector):
                    deadline = time.monotonic() + WAIT_S
                    await router_asleep(router, deadline)
                    ring = request_path_ring(kafka, topics)
                    assert ring is not None
                    ring()
                    sleepers = (retriever.quiet, injector.quiet, quiet)
                    while any(q is None or q.woken["rung"] < 1 for q in sleepers):
                        assert time.monotonic() < deadline, "the arrival ring did not wake every hop"
                        await asyncio.sleep(0.01)
                    assert all(q is not None and q.woken["fallback"] == 0 for q in sleepers)


async def test_the_warm_ring_wakes_the_request_path_for_a_moment_only(
    settings: Settings, topics: Topics, metrics: Metrics
) -> None:
    """The ring of a silence (``ctxbus.gateway.path_tick``) wakes the retriever and the reply reader, which fetch a
    few times and sleep again: with an awake time of ten minutes, only the warm ring's short wake can put them back
    to sleep within the test."""
    settings, kafka = with_fallback(settings, NEVER_MS, awake_ms=NEVER_MS)
    async with EventPublisher(kafka, "t") as pub:
        retriever = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        async with ReplyRouter(kafka, topics.context_injected, wake_on=(topics.retrieval_requested,)) as router:
            reader = router._quiet
            assert reader is not None
            async for _ in _running(retriever):
                deadline = time.monotonic() + WAIT_S
                await router_asleep(router, deadline)
                warm = request_path_warm(kafka, topics)
                assert warm is not None
                warm()
                sleepers = (retriever.quiet, reader)
                while any(q is None or q.woken["warm"] < 1 for q in sleepers):
                    assert time.monotonic() < deadline, "the warm ring did not wake the path"
                    await asyncio.sleep(0.01)
                await asleep(retriever)  # asleep again: the awake time of ten minutes did not apply
                await router_asleep(router, deadline)
                assert all(q is not None and q.woken["rung"] == 0 and q.woken["fallback"] == 0 for q in sleepers)


async def test_no_arrival_ring_without_the_doorbell(settings: Settings, topics: Topics) -> None:
    off = settings.kafka.model_copy(update={"doorbell": False})
    assert request_path_ring(KafkaClientConfig(off, off.bootstrap_servers, embedded=True), topics) is None
    assert request_path_warm(KafkaClientConfig(off, off.bootstrap_servers, embedded=True), topics) is None


async def test_a_cluster_keeps_polling_without_the_doorbell(settings: Settings) -> None:
    cluster = KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=False)
    assert cluster.doorbell is None and cluster.quiet(("t",)) is None
    off = settings.kafka.model_copy(update={"doorbell": False})
    assert KafkaClientConfig(off, off.bootstrap_servers, embedded=True).quiet(("t",)) is None


def _child_env(settings: Settings, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(data),
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_KAFKA_DOORBELL_FALLBACK_MS=str(NEVER_MS),
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_LOG_LEVEL="WARNING",
    )
    return env


async def test_the_injector_in_up_s_child_is_woken_by_a_publish_in_the_parent(
    settings: Settings, topics: Topics, tmp_path: Path
) -> None:
    settings, kafka = with_fallback(settings, NEVER_MS)
    read_fd, write_fd = os.pipe()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ctxbus.cli.up_child",
        "--broker",
        kafka.bootstrap_servers,
        "--embedded",
        "--ready-fd",
        str(write_fd),
        "injector",
        env=_child_env(settings, tmp_path / "child"),
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "child.log").open("wb"),
    )
    os.close(write_fd)
    try:
        ready = await asyncio.wait_for(asyncio.to_thread(os.read, read_fd, 4096), WAIT_S)
        assert b"pid" in ready, (tmp_path / "child.log").read_text()
        await asyncio.sleep(1.0)  # its consumers found nothing and sleep (if one did not, this test proves less)
        request = a_request("what breaks the login")
        completed = request.caused(
            RetrievalCompleted(
                request=request.payload,
                request_emitted_at=request.emitted_at,
                items=(),
                retrieval_duration_ms=0.0,
                embedding_model="none",
            ),
            producer="test",
        )
        async with (
            ReplyRouter(kafka, topics.context_injected) as router,
            EventPublisher(kafka, "parent") as pub,
        ):
            router.expect(request.correlation_id)
            await pub.publish(topics.retrieval_completed, completed)
            # the child's injector woke on this process's ring; this process's reader on the child's
            injected: Envelope[ContextInjected] = await router.wait(request.correlation_id, WAIT_S)
        assert injected.correlation_id == request.correlation_id
    finally:
        os.close(read_fd)
        child.terminate()
        await asyncio.wait_for(child.wait(), 30)
