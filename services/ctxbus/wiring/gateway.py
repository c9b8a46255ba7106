"""The hook gateway run (``run_gateway``): its publisher, reply router, admission, routes, capture, fallback
shipper and the request path's doorbell (``request_path_ring``), on the resources of this process's services."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.quiet import warm_ring
from ctxbus.api import Memory
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.settings import Settings
from ctxbus.wiring.resources import Resources
from ctxbus.wiring.services import publisher_for

log = structlog.get_logger("ctxbus.wiring")


def request_path_ring(config: KafkaClientConfig, topics: Topics) -> Callable[[], None] | None:
    """The embedded broker's doorbell rung for the requested topic when a hook arrives (None: no doorbell): the
    retriever, the injector (it wakes on that topic too) and the gateway's reply reader resume fetching while the
    gateway builds and publishes the request, instead of after it."""
    bell = config.doorbell
    if bell is None:
        return None
    topic = topics.retrieval_requested
    return lambda: bell.ring(topic)


def request_path_warm(config: KafkaClientConfig, topics: Topics) -> Callable[[], None] | None:
    """The request path's warm ring (None: no doorbell): the same three consumers fetch for a moment and sleep again,
    with nothing published (``ctxbus.gateway.path_tick``, while no hook comes)."""
    bell = config.doorbell
    if bell is None:
        return None
    name = warm_ring(topics.retrieval_requested)
    return lambda: bell.ring(name)


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
        tick = (
            PathTick(ring, settings.kafka.doorbell_warm_ms / 1000.0, warm=request_path_warm(config, topics))
            if ring is not None
            else None
        )
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
