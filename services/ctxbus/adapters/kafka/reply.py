"""Waiting for the injected events of given correlation ids, without joining a consumer group.

The router assigns every partition of the injected topic and seeks to the end at
start; a caller registers the correlation id *before* publishing its request, so
the answer is seen however fast it comes. One router serves any number of
concurrent waits (the gateway's hooks) or a single one (``ctxbus request``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted, RetrievalRequested
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value
from ctxbus.contract.topics import Topics

log = structlog.get_logger("ctxbus.reply")

Injected = Envelope[ContextInjected]
#: how long the completed event is awaited once its injection has arrived (it was published first)
COMPLETED_GRACE_S = 2.0


Completed = Envelope[RetrievalCompleted]


class ReplyRouter:
    """Routes the injected events (or, with ``payload=RetrievalCompleted`` on the completed topic, the completed
    ones) to the waits registered for their correlation ids."""

    def __init__(
        self,
        config: KafkaClientConfig,
        topic: str,
        payload: type[Any] = ContextInjected,
        *,
        wake_on: tuple[str, ...] = (),
    ) -> None:
        """``wake_on``: topics whose doorbell rings wake the idle router too (the requests it awaits answers to)."""
        self._consumer = AIOKafkaConsumer(**config.consumer("reply", None))
        # idle, its partitions pause until the injector rings (the embedded broker never wakes a waiting fetch)
        self._quiet = config.quiet((topic,), wake_on=wake_on)
        self._topic = topic
        self._payload = payload
        self._deserialize = EventDeserializer()
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        try:
            await self._consumer.start()
        except BaseException:
            await self._consumer.stop()  # a consumer that could not connect is closed, not leaked
            raise
        await self._consumer.topics()  # metadata for the partition list
        partitions = self._consumer.partitions_for_topic(self._topic) or set()
        if not partitions:
            await self._consumer.stop()
            raise MissingTopic(self._topic)
        tps = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end positions now, not at the first fetch
            await self._consumer.position(tp)
        self._task = asyncio.create_task(self._route())

    def readiness(self) -> str | None:
        """None once the router reads every partition of the injected topic (``/readyz``), else why not."""
        return None if self._consumer.assignment() else "no partitions of the injected topic"

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for fut in self._waiting.values():
            fut.cancel()
        self._waiting.clear()
        await self._consumer.stop()

    async def __aenter__(self) -> ReplyRouter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def expect(self, correlation_id: uuid.UUID) -> asyncio.Future[Any]:
        """Register interest before publishing; the future gets the first injected event of that chain."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[str(correlation_id)] = fut
        return fut

    def forget(self, correlation_id: uuid.UUID) -> None:
        """Drop a registration whose request was never published (or is no longer awaited)."""
        fut = self._waiting.pop(str(correlation_id), None)
        if fut is not None and not fut.done():
            fut.cancel()

    async def wait(self, correlation_id: uuid.UUID, timeout_s: float) -> Any:
        """The injected event for ``correlation_id`` (registered with :meth:`expect`).

        TimeoutError after ``timeout_s``.
        """
        key = str(correlation_id)
        fut = self._waiting.get(key) or self.expect(correlation_id)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._waiting.pop(key, None)

    async def _route(self) -> None:
        quiet = self._quiet
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=quiet.linger_ms if quiet is not None else 100)
            except asyncio.CancelledError:
                raise
            except Exception:  # keep serving: the next fetch may work
                log.exception("reply_fetch_failed")
                await asyncio.sleep(0.1)
                continue
            if quiet is not None:
                if batch:
                    quiet.busy()
                elif quiet.drowsy():
                    await quiet.sleep(self._consumer)
            for records in batch.values():
                for rec in records:
                    key = header_value(list(rec.headers or ()), HEADER_CORRELATION_ID)
                    fut = self._waiting.get(key or "")
                    if fut is None or fut.done():
                        continue
                    try:
                        event = self._deserialize(rec.value)
                    except EventDecodeError as exc:
                        log.warning("reply_undecodable", offset=rec.offset, reason=exc.reason)
                        continue
                    if isinstance(event.payload, self._payload):
                        fut.set_result(event)


async def request_injection(
    config: KafkaClientConfig,
    topics: Topics,
    request: Envelope[RetrievalRequested],
    timeout_s: float,
    *,
    client_id: str,
) -> Injected:
    """Publish one retrieval request and wait for its injection (one-shot callers: CLI, gap API, scripts).

    TimeoutError after ``timeout_s``. Long-lived callers (the gateway) keep one router instead.
    """
    async with (
        ReplyRouter(config, topics.context_injected, wake_on=(topics.retrieval_requested,)) as router,
        EventPublisher(config, client_id, schemas_topic=topics.schemas) as publisher,
    ):
        router.expect(request.correlation_id)
        await publisher.publish(topics.retrieval_requested, request)
        injected: Injected = await router.wait(request.correlation_id, timeout_s)
        return injected


async def request_explained(
    config: KafkaClientConfig,
    topics: Topics,
    request: Envelope[RetrievalRequested],
    timeout_s: float,
    *,
    client_id: str,
) -> tuple[Injected, Completed | None]:
    """:func:`request_injection`, and the retriever's completed event of the same chain (its ranked items with
    their score breakdowns and notices, such as why the floor turned the request away); None when it is not
    seen within a moment of the injection (it is published before it, so it normally is)."""
    async with (
        ReplyRouter(config, topics.context_injected, wake_on=(topics.retrieval_requested,)) as router,
        ReplyRouter(
            config, topics.retrieval_completed, RetrievalCompleted, wake_on=(topics.retrieval_requested,)
        ) as completed_router,
        EventPublisher(config, client_id, schemas_topic=topics.schemas) as publisher,
    ):
        router.expect(request.correlation_id)
        completed_router.expect(request.correlation_id)
        await publisher.publish(topics.retrieval_requested, request)
        injected: Injected = await router.wait(request.correlation_id, timeout_s)
        try:
            completed: Completed = await completed_router.wait(request.correlation_id, COMPLETED_GRACE_S)
        except TimeoutError:
            return injected, None
        return injected, completed
