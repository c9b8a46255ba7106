"""The one place that connects settings, adapters and handlers into running services.

``ctxbus run X`` runs one service; ``ctxbus up`` runs all three in one process
(they share the embedder, the store and one metrics endpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.handling import Handler
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.runner import ConsumerRunner
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader
from ctxbus.adapters.kafka.topic_ends import TopicEnds
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.api import Memory
from ctxbus.components import injector_handler, open_embedder, open_store, retriever_handler, utc_now
from ctxbus.contract.envelope import EventType
from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.contract.topics import Topics
from ctxbus.injector.attempts import AttemptRecorderHandler, TaskOutcomeHandler
from ctxbus.injector.expiry import InjectorDeadlines
from ctxbus.injector.fence import AttemptsFence
from ctxbus.learning.handler import LearningHandler, relearn
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, VectorStore
from ctxbus.recorder.handler import RecorderHandler
from ctxbus.retriever.expiry import RetrieverDeadlines
from ctxbus.retriever.keep_warm import KeepWarm
from ctxbus.retriever.memory_curation import MemoryCurationHandler
from ctxbus.retriever.memory_upserts import MemoryUpsertHandler
from ctxbus.settings import Settings
from ctxbus.state_groups import consumer_group, state_group

log = structlog.get_logger("ctxbus.wiring")

SERVICES = ("retriever", "injector", "recorder")


@dataclass
class Resources:
    """What the services of one process share; closed together."""

    settings: Settings
    metrics: Metrics
    embedder: Embedder | None = None
    store: VectorStore | None = None
    record: InjectionRecord | None = None
    attempts: AttemptStore | None = None
    ledger: LearningLedger | None = None
    curation: CurationLedger | None = None
    #: embeds a request's query ahead of the retriever of this process (set when it runs here; see the gateway)
    warm: Callable[[RetrievalRequested], None] | None = None
    #: forgets an ended session's task classifications in the retriever of this process (set when it runs here)
    forget: Callable[[str], int] | None = None
    #: closed after the consumer loops stop, before the rest (clients the loops' handlers use)
    async_closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def warm_query(self, request: RetrievalRequested) -> None:
        """The retriever's ``warm`` when a retriever runs in this process; nothing otherwise."""
        if self.warm is not None:
            self.warm(request)

    def session_ended(self, session_id: str) -> None:
        """The retriever's ``forget_session`` when a retriever runs in this process; nothing otherwise."""
        if self.forget is not None:
            self.forget(session_id)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
        if self.curation is not None:
            self.curation.close()
        if self.store is not None:
            self.store.close()
        if self.record is not None:
            self.record.close()
        if self.attempts is not None:
            self.attempts.close()


@dataclass(frozen=True, slots=True)
class RunnerSpec:
    """One consumer loop of a service: its name, handler, input and outputs; a ``background`` loop is off the
    request path (it polls an idle broker less often). ``group``: its consumer group when it is not the service's
    shared one (a state loop's: ``state_group``); ``progress``: where it tells how far it got (read-your-writes)."""

    name: str
    handler: Handler
    topic: str
    expect: str
    outputs: tuple[str, ...] = ()
    background: bool = False
    #: upstream topics whose doorbell rings wake this loop too (the embedded broker's idle consumers sleep)
    wake_on: tuple[str, ...] = ()
    group: str | None = None
    progress: Progress | None = None
    #: outputs marked as this loop's own answers (a group of its own whose inputs other members answer too)
    answered_by: str | None = None


def build_runners(
    name: str, res: Resources, topics: Topics, config: KafkaClientConfig | None = None
) -> list[RunnerSpec]:
    """The consumer loops a service runs (the injector also records agent attempts for pre-context and
    closes the tasks an outcome ended). The loops that build a member's state read their whole topic in a group
    of their own (``state_group``); the request path's loops share the service's group. ``config``: the injector's
    pre-context then waits for the attempts recorded before its request (``ctxbus.injector.fence``)."""
    s = res.settings
    prefix = s.topic_prefix
    if name == "retriever":
        if res.embedder is None:
            res.embedder = open_embedder(s)
        if res.store is None:
            res.store = open_store(s, res.embedder)
        from ctxbus.adapters.embedding.query_cache import CachedQueryEmbedder  # noqa: PLC0415

        # the next queries embedded together, prompts asked again not embedded again
        queries = CachedQueryEmbedder(res.embedder, size=s.embedder.query_cache)
        retriever = retriever_handler(s, queries, res.store, topics, res.metrics, query_batch=s.embedder.query_batch)
        res.warm = retriever.warm
        res.forget = retriever.forget_session
        if res.ledger is None:
            res.ledger = LearningLedger(s.learning_db)
        learning = LearningHandler(res.ledger, res.store)
        if res.curation is None:
            res.curation = CurationLedger(s.curation_db)
        return [
            RunnerSpec(
                "retriever",
                # requests past (or about to miss) their deadline are answered at once, the oldest first under load
                RetrieverDeadlines(
                    retriever,
                    topic=topics.retrieval_completed,
                    embedding_model=res.embedder.model_id,
                    metrics=res.metrics,
                    clock=utc_now,
                ),
                topics.retrieval_requested,
                EventType.RETRIEVAL_REQUESTED,
                (topics.retrieval_completed,),
            ),
            memory_loop(res, topics, shared_store=bool(s.qdrant.url)),
            # ... and forgets and pins: what was forgotten is remembered (by every member: every member's upserts
            # are checked against it), so no upsert brings it back
            RunnerSpec(
                "memory-curation",
                MemoryCurationHandler(res.store, res.curation),
                topics.memory_curated,
                EventType.MEMORY_CURATED,
                background=True,
                group=state_group(prefix, "memory-curation", res.curation.state_id),
            ),
            # ... and what outcomes teach about the injected items: every member reads every injection and outcome
            # into its own ledger, so every member's counts are the same (a function of the set of facts)
            RunnerSpec(
                "learning-injections",
                learning.injections,
                topics.context_injected,
                EventType.CONTEXT_INJECTED,
                background=True,
                group=state_group(prefix, "learning-injections", res.ledger.state_id),
            ),
            RunnerSpec(
                "learning-outcomes",
                learning.outcomes,
                topics.outcome_recorded,
                EventType.OUTCOME_RECORDED,
                background=True,
                group=state_group(prefix, "learning-outcomes", res.ledger.state_id),
            ),
        ]
    if name == "injector":
        if res.attempts is None:
            res.attempts = AttemptStore(s.attempts_db)
        progress = Progress()
        fence = None
        if config is not None and s.precontext.fence_wait_s > 0:
            ends = TopicEnds(config, topics.attempt_recorded, client_id="attempts-ends")
            res.async_closers.append(ends.stop)
            fence = AttemptsFence(ends, progress, wait_s=s.precontext.fence_wait_s, clock=utc_now)
        injector = injector_handler(s, topics, res.metrics, embedder=res.embedder, attempts=res.attempts, fence=fence)
        attempts_group = state_group(prefix, "attempts", res.attempts.state_id)
        return [
            RunnerSpec(
                "injector",
                InjectorDeadlines(injector, topic=topics.context_injected, metrics=res.metrics, clock=utc_now),
                topics.retrieval_completed,
                EventType.RETRIEVAL_COMPLETED,
                (topics.context_injected,),
                # awake when a request enters the pipeline: fetching by the time the retriever answers
                wake_on=(topics.retrieval_requested,),
            ),
            RunnerSpec(
                "attempts",
                AttemptRecorderHandler(res.attempts),
                topics.attempt_recorded,
                EventType.ATTEMPT_RECORDED,
                background=True,
                group=attempts_group,
                progress=progress,
            ),
            RunnerSpec(
                "task-outcomes",
                TaskOutcomeHandler(res.attempts),
                topics.outcome_recorded,
                EventType.OUTCOME_RECORDED,
                background=True,
                group=state_group(prefix, "task-outcomes", res.attempts.state_id),
            ),
        ]
    if name == "recorder":
        if res.record is None:
            res.record = InjectionRecord(s.record_db)
        return [
            RunnerSpec(
                "recorder",
                RecorderHandler(res.record, res.metrics),
                topics.context_injected,
                EventType.CONTEXT_INJECTED,
                background=True,
            )
        ]
    raise ValueError(f"unknown service {name!r}; valid: {', '.join(SERVICES)}")


def memory_loop(res: Resources, topics: Topics, *, shared_store: bool) -> RunnerSpec:
    """Memory sent through the bus, stored by the retrievers, each answering an upsert once its items are searchable.

    One Qdrant server (``shared_store``): one write reaches every member, so the members share the work in the
    service's group, and a redelivered upsert is recognised by its answer. Embedded copies (Qdrant Edge, one per
    member): every member stores every upsert in its own copy, in a group of its own, and answers it too (an asker
    takes the first answer); its answers carry its group, so another member's answer never counts as its own."""
    embedder, store, curation, ledger = res.embedder, res.store, res.curation, res.ledger
    if embedder is None or store is None or curation is None or ledger is None:
        raise RuntimeError("the memory loop runs beside the retriever, on its embedder, store and ledgers")
    # an item stored after the outcomes that count for it gets their counts (a member's loops run at their own pace)
    handler = MemoryUpsertHandler(embedder, store, topics, curation, learned=relearn(ledger, store))
    prefix = res.settings.topic_prefix
    if shared_store:
        return RunnerSpec(
            "memory", handler, topics.memory_upserted, EventType.MEMORY_UPSERTED, (topics.memory_stored,), True
        )
    group = state_group(prefix, "memory", curation.state_id)
    return RunnerSpec(
        "memory",
        handler,
        topics.memory_upserted,
        EventType.MEMORY_UPSERTED,
        (topics.memory_stored,),
        background=True,
        group=group,
        answered_by=group,
    )


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


def request_path_ring(config: KafkaClientConfig, topics: Topics) -> Callable[[], None] | None:
    """The embedded broker's doorbell rung for the requested topic when a hook arrives (None: no doorbell): the
    retriever, the injector (it wakes on that topic too) and the gateway's reply reader resume fetching while the
    gateway builds and publishes the request, instead of after it."""
    bell = config.doorbell
    if bell is None:
        return None
    topic = topics.retrieval_requested
    return lambda: bell.ring(topic)


def _store_check(store: VectorStore) -> Callable[[], str | None]:
    """The store answers a count (the embedded engine at once; a Qdrant server over the network)."""

    def check() -> str | None:
        store.count(HEALTH_PROJECT)
        return None

    return check


def _memory_of(res: Resources) -> Callable[[], Memory | None]:
    """A Memory on the shared embedder and store, made once they exist (never closing the store)."""
    made: list[Memory] = []

    def memory() -> Memory | None:
        if not made and res.embedder is not None and res.store is not None:
            made.append(Memory(res.settings, res.embedder, res.store, owns_store=False))
        return made[0] if made else None

    return memory


async def run_gateway(
    settings: Settings,
    config: KafkaClientConfig,
    metrics: Metrics,
    stop: asyncio.Event,
    on_ready: Callable[[int], None] | None = None,
    resources: Resources | None = None,
) -> None:
    """Serve the hook gateway until ``stop``; ``on_ready`` gets the bound port.

    With the ``resources`` the services of this process share, the gateway also serves the Python
    API (``/v1/search``, ``/v1/prime``, ``/v1/count``) on their embedder and store, once the retriever opened them.
    """
    from ctxbus.adapters.kafka.reply import ReplyRouter  # noqa: PLC0415
    from ctxbus.capture.redaction import capture_redactor  # noqa: PLC0415
    from ctxbus.gateway.admission import Admission  # noqa: PLC0415
    from ctxbus.gateway.capture import SessionCapture  # noqa: PLC0415
    from ctxbus.gateway.fallback_shipper import FallbackShipper  # noqa: PLC0415
    from ctxbus.gateway.http import HttpServer  # noqa: PLC0415
    from ctxbus.gateway.library import LibraryRoutes  # noqa: PLC0415
    from ctxbus.gateway.memory_routes import MemoryRoutes  # noqa: PLC0415
    from ctxbus.gateway.outcomes import OutcomeTracker  # noqa: PLC0415
    from ctxbus.gateway.path_tick import PathTick  # noqa: PLC0415
    from ctxbus.gateway.pattern_sync import PatternSync  # noqa: PLC0415
    from ctxbus.gateway.secret_file import gateway_secret  # noqa: PLC0415
    from ctxbus.gateway.service import HookGateway  # noqa: PLC0415
    from ctxbus.hooks.transport import SOCKET_FILE  # noqa: PLC0415

    topics = Topics(settings.topic_prefix)
    # only local, non-browser callers with the installation's secret (made now if there is none yet)
    admission = Admission(gateway_secret(settings), allowed_hosts=settings.gateway.allowed_host_list)
    async with (
        publisher_for(config, "gateway", topics) as publisher,
        # awake as soon as a hook's request is published (by this process: the ring is local)
        ReplyRouter(config, topics.context_injected, wake_on=(topics.retrieval_requested,)) as router,
    ):
        library = LibraryRoutes(_memory_of(resources)) if resources is not None else None
        memory = MemoryRoutes(_memory_of(resources)) if resources is not None else None
        outcomes = OutcomeTracker(topics, publisher) if settings.hook.outcomes else None
        patterns = PatternSync(
            config,
            topics,
            publisher,
            state_dir=settings.data_dir / "pattern-sync",
            patterns_file=settings.hook.patterns_file,
            home=Path.home(),
            # the staleness check reads the project's items where the store's owner runs in this process
            items_of=resources.store.items if resources is not None and resources.store is not None else None,
        )
        # a hook's query embedded while its request crosses the bus, by the retriever of this process (if it runs here)
        warm = resources.warm_query if resources is not None and settings.gateway.warm_queries else None
        # memory captured from the sessions by rules, after each hook has answered (every text redacted first)
        capture = (
            SessionCapture(
                topics,
                publisher,
                settings.session_capture,
                redact=capture_redactor(),
                patterns_file=settings.hook.patterns_file,
            )
            if settings.session_capture.enabled
            else None
        )
        # fallback answers (the pattern file's, the client's and this gateway's) reach the bus once it takes them
        shipper = FallbackShipper(settings.data_dir, topics, publisher)
        # the embedded broker's doorbell rings the request path awake when a hook arrives, and after a silence
        ring = request_path_ring(config, topics)
        tick = PathTick(ring, settings.kafka.doorbell_warm_ms / 1000.0) if ring is not None else None
        gateway = HookGateway(
            settings.hook,
            topics,
            publisher,
            router,
            metrics,
            library,
            outcomes,
            patterns,
            warm,
            memory=memory,
            capture=capture,
            data_dir=settings.data_dir,
            on_spooled=shipper.wake,
            session_ended=resources.session_ended if resources is not None else None,
            on_arrival=tick.arrived if tick is not None else None,
        )
        server = HttpServer(
            admission.wrap(gateway.handle),
            host=settings.gateway.host,
            port=settings.gateway.port,
            max_body=settings.gateway.max_body_bytes,
            unix_path=str(settings.data_dir / SOCKET_FILE) if settings.gateway.unix_socket else None,
        )
        admission.port = settings.gateway.port or None  # the Host check's port; 0: the one bound, set below
        port = await server.start()
        admission.port = port
        log.info("gateway_listening", host=settings.gateway.host, port=port, unix_socket=server.unix_path)
        metrics.health.add("gateway", router.readiness)  # listening, and the broker answers its reply reader
        background = [asyncio.create_task(shipper.run(stop))]
        if tick is not None:
            background.append(asyncio.create_task(tick.run(stop)))
        if on_ready is not None:
            on_ready(port)
        try:
            await stop.wait()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            metrics.health.remove("gateway")
            await server.stop()
            await patterns.close()
            if capture is not None:
                await capture.close()
