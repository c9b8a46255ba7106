"""``ctxbus up``'s stack, run in rounds: one round per life of the embedded broker.

A round creates the topics, refills the broker from the archive, starts the child processes, the gateway, the
services of ``up`` and the archiver, writes the runtime file once every part is ready, and runs until ``up`` is
asked to stop. With the embedded broker and the archive, a round also ends when the broker is due for
recycling (:mod:`ctxbus.core.broker_recycle`: a partition took ``CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS`` records
and the stack was quiet for ``CTXBUS_KAFKA_EMBEDDED_RECYCLE_IDLE_S``). Then everything stops as on SIGTERM (the
event in flight finished and committed, the archive drained with the groups' positions), the broker restarts on
the same port, empty, and the next round refills it and starts again. Meanwhile hooks get the answer they get
with no stack (valid output, exit 0), ``/readyz`` says ``recycling``, and the runtime file keeps ``up``'s pid (a
second ``up`` must not start while the store is briefly closed).

The metrics server, its port and the signal handlers belong to ``up``, not to a round: they last across rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.broker_embedded import BrokerStartError, EmbeddedBroker
from ctxbus.adapters.kafka import broker_gone
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.errors import CliError
from ctxbus.cli.up_broker import (
    BROKER_CHECK_S,
    RECYCLING_CHECK,
    BrokerLife,
    broker_died,
    reap_client_tasks,
    rewrite_runtime,
    services_ended,
    watch_broker,
)
from ctxbus.cli.up_processes import StackParts
from ctxbus.contract.topics import Topics
from ctxbus.core.broker_recycle import RecyclePolicy
from ctxbus.core.broker_restarts import BrokerRestarts
from ctxbus.core.process_layout import Layout
from ctxbus.observability import Metrics
from ctxbus.runtime import RuntimeInfo
from ctxbus.settings import Settings
from ctxbus.wiring import Resources, run_gateway, run_services

if TYPE_CHECKING:
    from ctxbus.archive.archiver import Archiver

log = structlog.get_logger("ctxbus.cli")

#: how often a round looks whether the broker is due for recycling
RECYCLE_CHECK_S = 5.0


def install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def create_topics(settings: Settings, config: KafkaClientConfig) -> list[str]:
    topics = Topics(settings.topic_prefix)
    return await ensure_topics(
        config,
        topics.all(),
        compacted=(topics.schemas,),
        partitions=settings.kafka.topic_partitions,
        replication=settings.kafka.topic_replication,
    )


def archive_on(settings: Settings, config: KafkaClientConfig) -> bool:
    """Whether ``up`` archives the topics: ``CTXBUS_ARCHIVE_ENABLED``, else on for the embedded broker only."""
    return settings.archive.enabled if settings.archive.enabled is not None else config.embedded


def recycle_policy(
    settings: Settings, config: KafkaClientConfig, broker: EmbeddedBroker | None
) -> RecyclePolicy | None:
    """The policy when ``up`` may recycle: its own broker, and an archive to refill the next one from."""
    if broker is None or not archive_on(settings, config) or settings.kafka.embedded_recycle_records == 0:
        return None
    return RecyclePolicy(settings.kafka.embedded_recycle_records, settings.kafka.embedded_recycle_idle_s)


async def run_up(settings: Settings, config: KafkaClientConfig, layout: Layout, broker: EmbeddedBroker | None) -> int:
    """Run rounds until ``up`` is asked to stop (SIGTERM, SIGINT) or a part of it fails (CliError)."""
    terminate = asyncio.Event()
    install_signals(terminate)
    metrics = Metrics()
    port = metrics.serve(settings.service.metrics_host, settings.service.metrics_port)
    policy = recycle_policy(settings, config, broker)
    restarts = BrokerRestarts(settings.kafka.embedded_restart_limit, settings.kafka.embedded_restart_window_s)
    between = BrokerLife()
    recycling_since: float | None = None
    while True:
        between.restarted, between.died = between.died is not None, None
        try:
            recycle = await _round(
                settings, config, layout, metrics, port, terminate, broker, policy, recycling_since, between
            )
        except KafkaError:  # the broker died while the round started (topics, refill): the same as dying later
            if broker is None or broker.exit_reason() is None:
                raise
            broker_died(broker, metrics, settings, between)
            recycle = False
        if terminate.is_set() or broker is None or not (recycle or between.died):
            return 0
        recycling_since = between.died_at if between.died is not None else time.monotonic()
        if between.died is not None:
            delay = restarts.next_delay(recycling_since)
            if delay is None:
                log.error("broker_failed", reason=between.died, action="stop", restart_limit=restarts.limit)
                raise CliError(restarts.refusal(between.died), 1)
            log.warning("broker_restarting", after_s=delay, restarts=restarts.used, restart_limit=restarts.limit)
            with contextlib.suppress(TimeoutError):  # the backoff, unless up is asked to stop meanwhile
                await asyncio.wait_for(terminate.wait(), delay)
            if terminate.is_set():
                return 0
            await reap_client_tasks()
        else:
            metrics.health.add(RECYCLING_CHECK, lambda: "recycling the embedded broker")
        try:  # on this (the main) thread: the new broker's parent-death signal follows the thread that starts it
            broker.restart()
        except BrokerStartError as exc:
            raise CliError(f"cannot restart the embedded broker: {exc}", 1) from exc
        broker_gone.mark_back(broker.bootstrap_servers)
        (metrics.broker_restarts if between.died else metrics.broker_recycles).inc()
        rewrite_runtime(settings, between, broker.pid)
        log.info("broker_restarted", broker_pid=broker.pid, bootstrap_servers=broker.bootstrap_servers)
        if terminate.is_set():  # asked to stop meanwhile: the archive holds everything, nothing to refill
            return 0


async def _round(
    settings: Settings,
    config: KafkaClientConfig,
    layout: Layout,
    metrics: Metrics,
    port: int,
    terminate: asyncio.Event,
    broker: EmbeddedBroker | None,
    policy: RecyclePolicy | None,
    recycling_since: float | None,
    between: BrokerLife,
) -> bool:
    """One round; True when it ended for a recycle of the broker (``between.died`` says when it ended because the
    broker died)."""
    stop = asyncio.Event()
    created = await create_topics(settings, config)
    parts = StackParts(layout, settings, config, metrics.health)
    # up's /metrics serves its children's series too: one address has every counter
    metrics.child_ports = lambda: [c.metrics_port for c in parts.children if c.metrics_port]
    gateway_port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    started_at = datetime.now(UTC).isoformat()
    broker_pid = broker.pid if broker is not None else None
    restarted = between.restarted

    def write_runtime() -> None:
        between.runtime = RuntimeInfo(
            pid=os.getpid(),
            bootstrap_servers=config.bootstrap_servers,
            embedded=config.embedded,
            metrics_port=port,
            gateway_port=gateway_port.result(),
            topic_prefix=settings.topic_prefix,
            started_at=started_at,
            broker_pid=broker_pid,
            service_processes=parts.processes(),
        )
        between.runtime.write(settings.runtime_file)

    async def announce() -> None:
        """The runtime file is the readiness signal: written once every service, in every process, can answer."""
        await parts.ready.wait()
        gateway = await gateway_port
        write_runtime()
        parts.on_change = write_runtime  # a restarted child: its pid and metrics port
        metrics.health.remove(RECYCLING_CHECK)
        if recycling_since is not None:
            seconds = round(time.monotonic() - recycling_since, 2)
            log.info("broker_recovered" if restarted else "broker_recycled", seconds=seconds, broker_pid=broker_pid)
            return
        log.info(
            "stack_up",
            bootstrap_servers=config.bootstrap_servers,
            embedded=config.embedded,
            topics_created=created,
            metrics=f"http://{settings.service.metrics_host}:{port}/metrics",
            gateway=f"http://{settings.gateway.host}:{gateway}/v1/hooks",
            services=list(parts.services),
            processes={"up": list(layout.in_up), **{c.name: c.info() for c in parts.children}},
            data_dir=str(settings.data_dir),
        )
        print(
            f"ctxbus up: broker {config.bootstrap_servers}, metrics :{port}, gateway :{gateway}, "
            f"services {parts.described()}",
            file=sys.stderr,
            flush=True,
        )

    recycled: list[str] = []
    async with _archiving(settings, config) as archiver:
        helpers = [asyncio.create_task(announce()), asyncio.create_task(_follow(terminate, stop))]
        if policy is not None and archiver is not None:
            helpers.append(asyncio.create_task(_watch(policy, archiver, metrics, parts, stop, recycled)))
        # one set of resources: the gateway serves the Python API on the retriever's embedder and store
        shared = Resources(settings=settings, metrics=metrics)
        # the child processes first: they start while this one loads the model
        tasks: list[Awaitable[None]] = [*parts.supervise(stop)]
        tasks.append(run_gateway(settings, config, metrics, stop, on_ready=gateway_port.set_result, resources=shared))
        if layout.in_up:
            in_up = run_services(
                layout.in_up, settings, config, metrics, stop, resources=shared, on_ready=lambda: parts.mark("up")
            )
            tasks.append(in_up)
        parts_running = [asyncio.ensure_future(task) for task in tasks]
        running = asyncio.gather(*parts_running)
        if broker is not None:
            watch = watch_broker(broker, metrics, settings, between, stop, archiver, parts, running)
            helpers.append(asyncio.create_task(watch))
        try:
            await services_ended(running, between, parts_running)
        finally:
            for task in helpers:
                task.cancel()
            await parts.stopped(stop)
    failure = parts.failure()
    if failure:
        raise CliError(failure, 1)
    return bool(recycled)


@contextlib.asynccontextmanager
async def _archiving(settings: Settings, config: KafkaClientConfig) -> AsyncIterator[Archiver | None]:
    """The archiver (None when the archive is off), refilled from and running for the body; at its end (after the
    services stopped) it reads what they wrote last, snapshots the groups' positions and flushes."""
    if not archive_on(settings, config):
        yield None
        return
    archiver = await _start_archive(settings, config)
    archive_stop = asyncio.Event()
    archiving = asyncio.create_task(archiver.run(archive_stop))
    archiving.add_done_callback(_archive_ended)
    try:
        yield archiver
    finally:
        archive_stop.set()
        if archiver.broker_gone:  # nothing more to read: a wait on the dead broker (a snapshot) is cut short
            done, _ = await asyncio.wait({archiving}, timeout=BROKER_CHECK_S)
            if not done:
                archiving.cancel()
        try:
            await archiving
        except asyncio.CancelledError:  # cut short above (it flushed and saved its state on the way out)
            current = asyncio.current_task()
            if not archiver.broker_gone or (current is not None and current.cancelling()):
                raise
        except Exception:  # the history is not the pipeline: say so loudly, stop cleanly
            log.exception("archive_failed", hint="the event history since the last flush may be missing")


async def _follow(terminate: asyncio.Event, stop: asyncio.Event) -> None:
    """``up``'s stop request ends the round."""
    await terminate.wait()
    stop.set()


async def _watch(
    policy: RecyclePolicy,
    archiver: Archiver,
    metrics: Metrics,
    parts: StackParts,
    stop: asyncio.Event,
    recycled: list[str],
) -> None:
    """Every RECYCLE_CHECK_S (or half the quiet time, when shorter): publish the fullest partition's count; once
    the stack is up and the broker is due, end the round (``recycled`` says why)."""
    every_s = min(RECYCLE_CHECK_S, policy.idle_s / 2)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        fullest, partition = archiver.fullest()
        metrics.broker_appended.set(fullest)
        if stop.is_set() or not parts.ready.is_set():
            continue
        reason = policy.due(fullest, archiver.idle_for(time.monotonic()))
        if reason is not None:
            log.info("broker_recycle", reason=reason, partition=partition, records=fullest)
            recycled.append(reason)
            stop.set()


def _archive_ended(task: asyncio.Task[None]) -> None:
    """An archiver that ends before the stack does is an error worth a log line the moment it happens."""
    if not task.cancelled() and task.exception() is not None:
        log.error("archive_stopped_early", error=repr(task.exception()))


async def _start_archive(settings: Settings, config: KafkaClientConfig) -> Archiver:
    """Refill the broker from the archive (history, timestamps, the groups' positions) and make the archiver."""
    from ctxbus.archive.archiver import Archiver  # noqa: PLC0415
    from ctxbus.archive.restore import restore  # noqa: PLC0415

    topics, root = Topics(settings.topic_prefix), settings.archive_dir
    report = await restore(config, topics, root)
    if report.total or report.skipped_partitions or report.damaged_files:
        log.info(
            "archive_restore",
            records=report.total,
            by_topic=report.records,
            groups=report.groups,
            skipped=report.skipped_partitions,
            damaged_files=report.damaged_files,
        )
        print(f"ctxbus up: restored {report.total} events from {root}", file=sys.stderr, flush=True)
    return Archiver(
        config,
        topics,
        root,
        flush_interval_s=settings.archive.flush_interval_ms / 1000.0,
        offsets_interval_s=settings.archive.offsets_interval_ms / 1000.0,
        retention_days=settings.archive.retention_days,
        retention_bytes=settings.archive.retention_bytes,
    )
