"""``ctxbus up``'s supervision of its embedded broker: a dead broker ends the round (``cli/up_rounds.py``), and
``run_up`` restarts it within ``core/broker_restarts.py``'s bound.

A round's watcher looks at the broker process every BROKER_CHECK_S. When it has died: the log line, ``/readyz``'s
reason and the runtime file without the dead pid (``broker_died``); the archiver keeps what it read and its last
snapshot of the groups' positions; the child processes get DEAD_BROKER_GRACE_S before SIGKILL and the services of
``up`` as long before they are cancelled, once. ``BrokerLife`` carries what a round leaves for the next: the runtime
file it wrote (rewritten when the broker dies and when a new one starts) and how the broker ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka import broker_gone
from ctxbus.cli.up_processes import StackParts
from ctxbus.observability import Metrics
from ctxbus.runtime import RuntimeInfo
from ctxbus.settings import Settings

if TYPE_CHECKING:
    from ctxbus.archive.archiver import Archiver

log = structlog.get_logger("ctxbus.cli")

#: how often a round looks whether the embedded broker's process still runs
BROKER_CHECK_S = 0.5
#: how long the services may take to stop once the broker died (they cannot commit anything), before they are
#: cancelled (the child processes: SIGKILLed)
DEAD_BROKER_GRACE_S = 2.0
#: how long the services' cleanup may take after their cancellation before the round ends without them (their Kafka
#: clients are then reaped): nothing of it waits on the dead broker (``adapters/kafka/broker_gone.py``)
DEAD_BROKER_CLEANUP_S = 5.0
#: ``/readyz``'s check while the broker is recycled or restarted
RECYCLING_CHECK = "stack"


@dataclass
class BrokerLife:
    """What one round leaves for ``run_up`` between rounds: the runtime file it wrote (rewritten when the broker
    dies and when a new one starts: the file always names the live broker) and how the broker ended, if it died."""

    runtime: RuntimeInfo | None = None
    died: str | None = None
    #: when it died (monotonic seconds)
    died_at: float = 0.0
    #: the round starts after the broker died (not after a recycle, nor the first round)
    restarted: bool = False


#: where the Kafka client's code lives (its background tasks: a producer's sender, a client's metadata sync)
CLIENT_PACKAGE = "/aiokafka/"


async def reap_client_tasks() -> int:
    """Cancel every Kafka client task still running after a round that ended on a dead broker, and wait for them;
    how many there were. A service cancelled while its producer was flushing leaves that producer's sender
    retrying its batch, and the batch reached the new broker on the same port before the refill (measured with
    ``ctxbus bench broker-kill``: the refill then left that partition alone). No client of the old round may
    outlive it; the next round makes its own."""
    current = asyncio.current_task()
    leftovers = [
        task
        for task in asyncio.all_tasks()
        if task is not current
        and not task.done()
        and CLIENT_PACKAGE in getattr(getattr(task.get_coro(), "cr_code", None), "co_filename", "").replace("\\", "/")
    ]
    for task in leftovers:
        task.cancel()
    if leftovers:
        await asyncio.wait(leftovers, timeout=DEAD_BROKER_GRACE_S)
        log.warning("kafka_client_tasks_reaped", tasks=len(leftovers))
    return len(leftovers)


def rewrite_runtime(settings: Settings, between: BrokerLife, broker_pid: int | None) -> None:
    """The runtime file of the last round, naming ``broker_pid`` (None: the broker is dead, a new one not yet up)."""
    if between.runtime is not None:
        between.runtime = replace(between.runtime, broker_pid=broker_pid)
        between.runtime.write(settings.runtime_file)


def broker_died(broker: EmbeddedBroker, metrics: Metrics, settings: Settings, between: BrokerLife) -> None:
    """Note a dead broker once: the log line, ``/readyz``'s reason, the runtime file without its pid."""
    if between.died is not None:
        return
    reason = broker.exit_reason() or "gone"
    between.died, between.died_at = reason, time.monotonic()
    log.error("broker_died", broker_pid=broker.pid, reason=reason, action="restart")
    metrics.health.add(RECYCLING_CHECK, lambda: f"the embedded broker died ({reason}); restarting it")
    rewrite_runtime(settings, between, None)


async def services_ended(
    running: asyncio.Future[list[None]], between: BrokerLife, parts: Sequence[asyncio.Future[None]]
) -> None:
    """Wait for the round's services (``running`` gathers ``parts``); the watcher's cancellation of a stop that waited
    on a dead broker ends them too, a cancellation of ``up`` itself goes on. After a broker death every part is
    waited for to its end (the gather ends with its first cancelled part): no service of the dead broker's round may
    go on while the next round starts (its store, its Kafka clients)."""
    try:
        await running
    except (asyncio.CancelledError, KafkaError):
        current = asyncio.current_task()
        if between.died is None or (current is not None and current.cancelling()):
            raise
    if between.died is None:
        return
    _, pending = await asyncio.wait(parts, timeout=DEAD_BROKER_CLEANUP_S)
    if pending:
        names = sorted(
            str(getattr(task.get_coro(), "__qualname__", task)) for task in pending if isinstance(task, asyncio.Task)
        )
        log.warning("services_not_stopped", parts=names, after_s=DEAD_BROKER_CLEANUP_S)


async def watch_broker(
    broker: EmbeddedBroker,
    metrics: Metrics,
    settings: Settings,
    between: BrokerLife,
    stop: asyncio.Event,
    archiver: Archiver | None,
    parts: StackParts,
    running: asyncio.Future[list[None]],
) -> None:
    """Every BROKER_CHECK_S: whether the broker process still runs; when it has died, end the round (``run_up``
    restarts it). Nothing in flight can be finished or committed on a dead broker: the archiver keeps what it has
    and its last snapshot of the groups' positions, the child processes get DEAD_BROKER_GRACE_S before SIGKILL,
    and the services of ``up`` as long before they are cancelled (what they had not committed is read again)."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), BROKER_CHECK_S)
        if broker.exit_reason() is None:
            continue
        if archiver is not None:
            archiver.broker_gone = True
        # first: the services' records in flight fail now, before their stop would wait for them
        in_flight = await broker_gone.mark_gone(broker.bootstrap_servers)
        parts.hurry(DEAD_BROKER_GRACE_S)
        broker_died(broker, metrics, settings, between)
        if in_flight:
            log.warning("records_in_flight_failed", producers=in_flight, reason="the broker died")
        stop.set()
        done, _ = await asyncio.wait({running}, timeout=DEAD_BROKER_GRACE_S)
        if not done:
            # once: their cleanup then runs to its end (it may wait on the dead broker a few seconds more). Cutting
            # it short too left a producer whose batch reached the new broker before the refill (measured), and the
            # refill leaves a partition that holds records alone
            log.warning("services_cancelled", reason="the broker died", after_s=DEAD_BROKER_GRACE_S)
            running.cancel()
        return
