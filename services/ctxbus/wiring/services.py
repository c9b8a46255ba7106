"""The services' consumer loops run: which loops a service runs (``build_runners``, each service's in its own
module), and ``run_services``, which runs the loops of the named services of one process until it stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.runner import ConsumerRunner
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.ports import VectorStore
from ctxbus.retriever.keep_warm import KeepWarm
from ctxbus.settings import Settings
from ctxbus.state_groups import consumer_group
from ctxbus.wiring.injector import injector_runners
from ctxbus.wiring.recorder import recorder_runners
from ctxbus.wiring.resources import Resources, RunnerSpec
from ctxbus.wiring.retriever import retriever_runners

log = structlog.get_logger("ctxbus.wiring")

SERVICES = ("retriever", "injector", "recorder")


def build_runners(
    name: str, res: Resources, topics: Topics, config: KafkaClientConfig | None = None
) -> list[RunnerSpec]:
    """The consumer loops a service runs (the injector also records agent attempts for pre-context and
    closes the tasks an outcome ended). The loops that build a member's state read their whole topic in a group
    of their own (``state_group``); the request path's loops share the service's group. ``config``: the injector's
    pre-context then waits for the attempts recorded before its request (``ctxbus.injector.fence``)."""
    if name == "retriever":
        return retriever_runners(res, topics)
    if name == "injector":
        return injector_runners(res, topics, config)
    if name == "recorder":
        return recorder_runners(res, topics)
    raise ValueError(f"unknown service {name!r}; valid: {', '.join(SERVICES)}")


async def _when_ready(runners: list[ConsumerRunner], on_ready: Callable[[], None] | None) -> None:
    await asyncio.gather(*(r.ready.wait() for r in runners))
    log.info("services_ready", services=[r.name for r in runners])
    if on_ready is not None:
        on_ready()


@contextlib.asynccontextmanager
async def publisher_for(
    config: KafkaClientConfig, client_id: str, topics: Topics | None = None
) -> AsyncIterator[EventPublisher]:
    """A started publisher; with ``topics`` it announces its schemas on the schemas topic first."""
    publisher = EventPublisher(config, client_id, schemas_topic=topics.schemas if topics else None)
    await publisher.start()
    try:
        yield publisher
    finally:
        await publisher.stop()


#: a project no one uses: the store's readiness check counts its items
HEALTH_PROJECT = "__ctxbus_health__"


async def run_services(
    names: tuple[str, ...],
    settings: Settings,
    config: KafkaClientConfig,
    metrics: Metrics,
    stop: asyncio.Event,
    resources: Resources | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run the named services until ``stop`` is set; each is its own consumer group.

    ``resources`` lets a caller share an already loaded embedder or opened store;
    whatever is passed in or opened here is closed when the services stop.
    ``on_ready`` is called once every service has joined its group and got its partitions.
    """
    topics = Topics(settings.topic_prefix)
    res = resources or Resources(settings=settings, metrics=metrics)
    try:
        async with publisher_for(config, "+".join(names), topics) as publisher:
            schemas = SchemaTopicReader(config, topics.schemas)
            runners = [
                ConsumerRunner(
                    name=spec.name,
                    config=config,
                    topic=spec.topic,
                    group_id=spec.group or consumer_group(settings.topic_prefix, spec.name),
                    handler=spec.handler,
                    publisher=publisher,
                    dead_letter_topic=topics.dead_letter,
                    expect_event_type=spec.expect,
                    settings=settings.service,
                    metrics=metrics,
                    output_topics=spec.outputs,
                    schemas=schemas,
                    background=spec.background,
                    wake_on=spec.wake_on,
                    progress=spec.progress,
                    answered_by=spec.answered_by,
                )
                for name in names
                for spec in build_runners(name, res, topics, config)
            ]
            for runner in runners:
                metrics.health.add(f"consumer:{runner.name}", runner.readiness)
            if res.store is not None:
                metrics.health.add("store", _store_check(res.store))
            waiter = asyncio.create_task(_when_ready(runners, on_ready))
            # the retriever's model used while idle too: the first embed after minutes of silence was 6-10x slower
            warm = (
                KeepWarm(res.embedder, settings.embedder.keep_warm_s) if "retriever" in names and res.embedder else None
            )
            warming = asyncio.create_task(warm.run(stop)) if warm is not None else None
            try:
                await asyncio.gather(*(r.run(stop) for r in runners))
            finally:
                if warming is not None:
                    warming.cancel()
                    await asyncio.gather(warming, return_exceptions=True)
                for close in res.async_closers:
                    with contextlib.suppress(Exception):
                        await close()
                res.async_closers.clear()
                waiter.cancel()
                for runner in runners:
                    metrics.health.remove(f"consumer:{runner.name}")
                metrics.health.remove("store")
    finally:
        res.close()


def _store_check(store: VectorStore) -> Callable[[], str | None]:
    """The store answers a count (the embedded engine at once; a Qdrant server over the network)."""

    def check() -> str | None:
        store.count(HEALTH_PROJECT)
        return None

    return check
