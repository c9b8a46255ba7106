"""Read your writes for pre-context: a retry sent right after its attempt was recorded sees that attempt, even
when the injector's attempts loop is slow to fetch (here it waits up to 3 s per fetch, the embedded broker never
wakes a waiting fetch): the injector waits until that loop has passed the attempts topic's end as of the request
(``ctxbus.injector.fence``). With the fence off, the retries here get no pre-context at all: the attempt is
still on its way into the attempts loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.components import open_store
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import AttemptRecorded, AttemptStatus, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.wiring import Resources, run_services

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
TASK = "ryw-task"
#: the attempts loop's fetch wait: far longer than a request takes through the pipeline
SLOW_FETCH_MS = 3_000


@pytest.fixture
def slow_attempts(settings: Settings) -> Settings:
    kafka = settings.kafka.model_copy(update={"background_fetch_max_wait_ms": SLOW_FETCH_MS})
    precontext = settings.precontext.model_copy(update={"fence_wait_s": 30.0})
    return settings.model_copy(update={"kafka": kafka, "precontext": precontext})


@pytest.fixture
async def pipeline(
    slow_attempts: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> AsyncIterator[Resources]:
    metrics = Metrics()
    slow = KafkaClientConfig(slow_attempts.kafka, kafka.bootstrap_servers, embedded=True)
    store = open_store(slow_attempts, embedder)
    res = Resources(settings=slow_attempts, metrics=metrics, embedder=embedder, store=store)
    stop, ready = asyncio.Event(), asyncio.Event()
    names = ("retriever", "injector")
    task = asyncio.create_task(run_services(names, slow_attempts, slow, metrics, stop, res, on_ready=ready.set))
    await asyncio.wait_for(ready.wait(), 60)
    try:
        yield res
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def attempt(n: int) -> Envelope[AttemptRecorded]:
    payload = AttemptRecorded(
        task_id=TASK,
        attempt_number=n,
        provider="gemini",
        status=AttemptStatus.FAILED,
        files_created=(f"src/attempt_{n}.py",),
        validation_errors=(f"check {n} failed",),
    )
    return Envelope.root(payload, project=PROJECT, session_id=TASK, producer="test")


async def test_a_retry_sent_right_after_its_attempt_sees_it(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    async with EventPublisher(kafka, "t") as pub:
        for n in (1, 2, 3):
            await pub.publish(topics.attempt_recorded, attempt(n))  # acknowledged: recorded
            request = Envelope.root(
                RetrievalRequested(agent_name="copilot", prompt="fix it", trigger=Trigger.RETRY, task_id=TASK),
                project=PROJECT,
                session_id=TASK,
                producer="test",
            )
            context = (await request_injection(kafka, topics, request, 60, client_id="t")).payload.context
            assert context.startswith("--- RETRY CONTEXT ---"), (n, context)
            assert f"Attempt #{n + 1} - Previous validation failures:" in context, (n, context)
            assert f"- check {n} failed" in context
            assert all(f"src/attempt_{k}.py" in context for k in range(1, n + 1)), (n, context)
