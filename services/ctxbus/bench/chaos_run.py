"""One ``ctxbus bench chaos`` run on a started broker and services: the load, the faults while it runs (the
services SIGKILLed in turn, the broker frozen, the poison corpus), the drain, and the figures read back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench import chaos_load
from ctxbus.bench.chaos_plan import PARTITIONS, Plan, poison_plan
from ctxbus.bench.chaos_procs import SERVICES, Incarnation, ServiceProcesses, pause, resume
from ctxbus.bench.chaos_report import targets
from ctxbus.bench.chaos_tally import PoisonSent, tally
from ctxbus.bench.corpus import prompts
from ctxbus.bench.poison import MIB
from ctxbus.bench.stack import PROJECT
from ctxbus.bench.stats import summary
from ctxbus.contract.topics import Topics
from ctxbus.settings import Settings
from ctxbus.state_groups import member_groups

#: the services' dead-letter prefix (CTXBUS_SERVICE_DEAD_LETTER_PREFIX_BYTES's default, which the run keeps)
PREFIX_BYTES = 65_536
#: between a SIGKILL and the restart
RESTART_PAUSE_S = 1.0
#: how long a service may take to start and get its partitions (a loaded 2-core machine is slow)
READY_TIMEOUT_S = 300.0
#: the drain gives up when nothing moved (answers, committed offsets) for this long
DRAIN_IDLE_S = 120.0
PROGRESS_EVERY_S = 15.0
#: the kill rotation, downstream first: with the load flowing, each kill finds its service at work
KILL_ORDER = ("recorder", "injector", "retriever")
#: a kill counts as one of a service at work when its input grew this recently
BUSY_WITHIN_S = 2.0
#: log lines that show a redelivered input recognised (not answered twice)
REDELIVERY_MARKS = (b'"duplicate_skipped"', b'"injection_already_recorded"')


class ChaosError(RuntimeError):
    """The run could not be carried out (a service never started): no figures."""


@dataclass
class Kill:
    service: str
    at_s: float
    killed_at: float
    restarted: Incarnation
    during_load: bool
    #: records were arriving on the service's input just before the kill
    busy: bool

    def as_dict(self) -> dict[str, Any]:
        ready = self.restarted.ready_at
        return {
            "service": self.service,
            "at_s": round(self.at_s, 1),
            "back_after_s": round(ready - self.killed_at, 1) if ready is not None else None,
            "during_load": self.during_load,
            "busy": self.busy,
        }


class ChaosRun:
    def __init__(
        self,
        plan: Plan,
        settings: Settings,
        config: KafkaClientConfig,
        procs: ServiceProcesses,
        broker_pid: int,
        say: Callable[[str], None],
    ) -> None:
        self.plan, self.settings, self.config, self.procs = plan, settings, config, procs
        self.topics = Topics(settings.topic_prefix)
        self.broker_pid = broker_pid
        self.say = say
        self.stalled = asyncio.Event()
        self.seen = chaos_load.Watch()
        self.sent: list[str] = []
        self.sent_at: dict[str, float] = {}
        self.unsent = 0
        self.kills: list[Kill] = []
        self.stall: dict[str, float] = {}
        self.poison_sent: list[PoisonSent] = []
        self.poison_failed: list[str] = []
        self.t0 = 0.0
        self.load_s: float | None = None

    def _elapsed(self) -> float:
        return time.perf_counter() - self.t0

    async def _until(self, offset_s: float) -> None:
        delay = self.t0 + offset_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)

    async def _wait_ready(self, names: tuple[str, ...]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(self.procs.ready(n) for n in names):
            for gone in self.procs.check_exits():
                raise ChaosError(f"the {gone.name} exited with code {gone.code} while starting:\n{gone.log_tail}")
            if time.monotonic() > deadline:
                late = [n for n in names if not self.procs.ready(n)]
                raise ChaosError(f"{', '.join(late)} not ready after {READY_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.2)

    async def _supervise(self) -> None:
        """Notes when each restart is ready; restarts a service that died without being killed (reported)."""
        while True:
            for name in SERVICES:
                self.procs.ready(name)
            for gone in self.procs.check_exits():
                self.say(f"UNEXPECTED: the {gone.name} exited with code {gone.code}; restarting it\n{gone.log_tail}")
                await asyncio.sleep(RESTART_PAUSE_S)
                self.procs.start(gone.name)
            await asyncio.sleep(0.25)

    async def _progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            answered = sum(1 for cid in self.sent if cid in self.seen.injected_at)
            self.say(
                f"sent {len(self.sent)}/{self.plan.requests}, answered {answered}, kills {len(self.kills)}, "
                f"poison {len(self.poison_sent)}, stalled {'yes' if self.stalled.is_set() else 'no'}"
            )

    async def _send(self, publisher: EventPublisher, i: int, domain: str, prompt: str) -> None:
        event = chaos_load.chaos_request(i, PROJECT, domain, prompt)
        cid = str(event.correlation_id)
        record = publisher.prepare(self.topics.retrieval_requested, event)
        self.sent_at[cid] = time.perf_counter()
        if await chaos_load.send_until_acknowledged(publisher, record):
            self.sent.append(cid)
        else:
            self.unsent += 1

    async def _load(self, publisher: EventPublisher) -> None:
        sends = []
        for i, (domain, prompt) in enumerate(prompts(self.plan.requests)):
            await self._until(i / self.plan.rate)
            sends.append(asyncio.create_task(self._send(publisher, i, domain, prompt)))
        await asyncio.gather(*sends)
        self.load_s = self._elapsed()
        self.say(f"load done: {len(self.sent)} requests acknowledged in {self.load_s:.0f} s")

    async def _kill_in_turn(self) -> None:
        t = self.topics
        consumes = {
            "retriever": t.retrieval_requested,
            "injector": t.retrieval_completed,
            "recorder": t.context_injected,
        }
        for i in range(self.plan.kills):
            name = KILL_ORDER[i % len(KILL_ORDER)]
            await self._until(self.plan.kill_at(i))
            deadline = time.monotonic() + READY_TIMEOUT_S
            while self.stalled.is_set() or not self.procs.ready(name):  # a kill hits a service at work
                if time.monotonic() > deadline:
                    raise ChaosError(f"the {name} was not back within {READY_TIMEOUT_S:.0f} s; kill {i + 1} not done")
                await asyncio.sleep(0.1)
            grew = self.seen.grew_at.get(consumes[name])
            busy = grew is not None and time.perf_counter() - grew < BUSY_WITHIN_S
            killed = self.procs.kill(name)
            if killed is None:
                continue
            killed_at, at_s = time.monotonic(), self._elapsed()
            self.say(f"SIGKILL {name} (incarnation {killed.number}) at {at_s:.0f} s")
            await asyncio.sleep(RESTART_PAUSE_S)
            self.kills.append(Kill(name, at_s, killed_at, self.procs.start(name), self.load_s is None, busy))

    async def _stall_broker(self) -> None:
        if self.plan.stall_s <= 0:
            return
        await self._until(self.plan.stall_at)
        started = time.perf_counter()
        pause(self.broker_pid)
        self.stalled.set()
        self.say(f"SIGSTOP broker at {self._elapsed():.0f} s for {self.plan.stall_s:g} s")
        try:
            await asyncio.sleep(self.plan.stall_s)
        finally:
            resume(self.broker_pid)
            self.stalled.clear()
            self.stall = {"at_s": round(started - self.t0, 1), "seconds": round(time.perf_counter() - started, 2)}

    async def _poison(self, producer: chaos_load.PoisonProducer) -> None:
        records = poison_plan(self.topics, member_groups(self.settings))
        for j, (case, topic, groups) in enumerate(records):
            await self._until(self.plan.poison_at(j, len(records)))
            while self.stalled.is_set():  # a send that times out could land twice, at an offset never learnt
                await asyncio.sleep(0.1)
            partition = j % PARTITIONS
            try:
                offset = await producer.send(topic, partition, case.key, case.value, case.headers)
            except KafkaError as exc:
                self.poison_failed.append(f"{case.name} on {topic}: {exc!r}")
                continue
            self.poison_sent.append(PoisonSent(case, topic, partition, offset, groups))

    async def _drain(self) -> bool:
        """Until every request is answered and every group has committed all it consumes; False on giving up."""
        t = self.topics
        consumed = {
            "retriever": t.retrieval_requested,
            "injector": t.retrieval_completed,
            "recorder": t.context_injected,
            "learning-injections": t.context_injected,
        }
        group = member_groups(self.settings)  # the learning loop's group is the retriever's own
        groups = {group[name]: topic for name, topic in consumed.items()}
        last: tuple[int, ...] = ()
        changed = time.monotonic()
        async with chaos_load.CommittedOffsets(self.config, list(groups)) as offsets:
            while True:
                answered = sum(1 for cid in self.sent if cid in self.seen.injected_at)
                lags = [
                    await offsets.lag(group, [TopicPartition(topic, p) for p in range(PARTITIONS)], self.seen.highwater)
                    for group, topic in groups.items()
                ]
                if answered == len(self.sent) and all(lag == 0 for lag in lags):
                    return True
                if (answered, *lags) != last:
                    last, changed = (answered, *lags), time.monotonic()
                elif time.monotonic() - changed > DRAIN_IDLE_S:
                    self.say(f"drain gave up: {answered}/{len(self.sent)} answered, lags {lags}")
                    return False
                await asyncio.sleep(0.5)

    async def execute(self) -> dict[str, Any]:
        t = self.topics
        await ensure_topics(self.config, t.all(), compacted=(t.schemas,), partitions=PARTITIONS, replication=1)
        for name in SERVICES:
            self.procs.start(name)
        started = time.perf_counter()
        await self._wait_ready(SERVICES)
        self.say(f"services ready in {time.perf_counter() - started:.0f} s; load starts")
        stop_watch = asyncio.Event()
        watched = (t.retrieval_requested, t.retrieval_completed, t.context_injected)
        helpers = [
            asyncio.create_task(chaos_load.watch(self.config, watched, t.context_injected, self.seen, stop_watch)),
            asyncio.create_task(self._supervise()),
            asyncio.create_task(self._progress()),
        ]
        try:
            async with (
                EventPublisher(self.config, "bench-chaos") as publisher,
                chaos_load.PoisonProducer(self.config) as producer,
            ):
                self.t0 = time.perf_counter()
                chaos = [
                    asyncio.create_task(self._kill_in_turn()),
                    asyncio.create_task(self._stall_broker()),
                    asyncio.create_task(self._poison(producer)),
                ]
                try:
                    await self._load(publisher)
                    await asyncio.gather(*chaos)
                finally:
                    for task in chaos:
                        task.cancel()
                    await asyncio.gather(*chaos, return_exceptions=True)
            drain_started = time.perf_counter()
            drained = await self._drain()
            drain_s = time.perf_counter() - drain_started
        finally:
            stop_watch.set()
            for task in helpers[1:]:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
        stop_codes = self.procs.stop_all()
        return await self._report(drained, drain_s, stop_codes)

    async def _report(self, drained: bool, drain_s: float, stop_codes: dict[str, int | None]) -> dict[str, Any]:
        t = self.topics
        completed, bad_completed = chaos_load.events_of(await chaos_load.read_topic(self.config, t.retrieval_completed))
        injected, bad_injected = chaos_load.events_of(await chaos_load.read_topic(self.config, t.context_injected))
        dead = chaos_load.dead_letters_of(await chaos_load.read_topic(self.config, t.dead_letter))
        record = InjectionRecord(self.settings.record_db)
        try:
            recorded = [row.correlation_id for row in record.recent(project=PROJECT, limit=len(self.sent) + 1_000)]
        finally:
            record.close()
        counts = tally(
            requests=self.sent,
            completed=completed,
            injected=injected,
            undecodable=bad_completed + bad_injected,
            dead_letters=dead,
            poison=self.poison_sent,
            recorded=recorded,
            prefix_bytes=PREFIX_BYTES,
            max_bytes=MIB,
        )
        latency = [
            (self.seen.injected_at[cid] - self.sent_at[cid]) * 1000 for cid in self.sent if cid in self.seen.injected_at
        ]
        unexpected = [
            {"service": e.name, "incarnation": e.number, "code": e.code, "log_tail": e.log_tail}
            for e in self.procs.unexpected
        ]
        result: dict[str, Any] = {
            "requests": self.plan.requests,
            "rate_per_s": self.plan.rate,
            "memories": self.plan.memories,
            "load_s": round(self.load_s or 0.0, 1),
            "drained": drained,
            "drain_s": round(drain_s, 1),
            "unsent": self.unsent,
            **counts.as_dict(),
            "poison_not_sent": self.poison_failed,
            "kills_requested": self.plan.kills,
            "kills_done": len(self.kills),
            "kills": [k.as_dict() for k in self.kills],
            "stall_s_requested": self.plan.stall_s,
            "stall": self.stall,
            "unexpected_exits": unexpected,
            "stop_codes": stop_codes,
            "redeliveries_recognised": self.procs.count_in_logs(REDELIVERY_MARKS),
            "end_to_end_ms": summary(latency),
        }
        result["targets"] = targets(result)
        result["ok"] = all(result["targets"].values())
        return result
