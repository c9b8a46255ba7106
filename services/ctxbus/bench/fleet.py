"""``ctxbus bench fleet``: several retrievers and injectors as separate processes on one embedded broker, a load
of prompts with outcomes, attempts and retries interleaved, SIGKILLs, a restart and a join during it; then
whether every member learned the same as a single member over the same events, whether every retry's
pre-context listed every attempt recorded before it, and how long a joining member took to catch up.

Catching up: from the joiner's start (process, model, group joins) until each of its state loops has committed
everything its topic held when it started (learning: injections and outcomes, memory; attempts: attempts and
task outcomes). The end of the run waits for every live member to commit everything, then stops them all and
reads each retriever's store.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.topic_ends import TopicEnds
from ctxbus.bench.chaos_load import Watch, read_topic, watch
from ctxbus.bench.cpu import process_cpu_s
from ctxbus.bench.fleet_load import Load, Sent
from ctxbus.bench.fleet_members import Fleet, FleetMember, fleet_env
from ctxbus.bench.fleet_state import disagreements, member_learned, missing_attempts, moved, single_member
from ctxbus.bench.stack import PROJECT
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import ContextInjected
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.ports import Embedder

#: a member that is not ready this long after its start failed to start
READY_TIMEOUT_S = 600.0
#: nothing moved (answers, commits) for this long: the run is stuck, not slow
STUCK_S = 300.0
#: a retry's pre-context may wait this long for its attempts (the requests carry no deadline)
FENCE_WAIT_S = 60.0


class FleetError(RuntimeError):
    """The run could not be carried out (a member never started, the load never drained)."""


@dataclass(frozen=True, slots=True)
class FleetPlan:
    requests: int = 2_000
    retrievers: int = 3
    injectors: int = 2
    #: requests unanswered at a time
    window: int = 6
    partitions: int = 6
    #: a fresh retriever joins after the load and catches up on the whole history (timed)
    final_join: bool = False


@dataclass
class CatchUp:
    member: str
    #: records its state loops had to read (their topics' ends when it started)
    records: int = 0
    seconds: float | None = None
    #: CPU the member's process had used by then (its start, the model and serving included)
    cpu_s: float | None = None


@dataclass
class FleetResult:
    sent: Sent
    members: list[str]
    items: int
    moved: int
    disagreements: list[str]
    missing_attempts: list[str]
    fence_timeouts: int
    catch_ups: list[CatchUp] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.disagreements and not self.missing_attempts

    def figures(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "requests": len(self.sent.requests),
            "retries": len(self.sent.retries),
            "outcomes": self.sent.outcomes,
            "task_outcomes": self.sent.task_outcomes,
            "attempts": self.sent.attempts,
            "memories_through_the_bus": len(self.sent.memories),
            "retrievers_compared": self.members,
            "items": self.items,
            "items_moved_by_learning": self.moved,
            "disagreements": len(self.disagreements),
            "disagreement_examples": self.disagreements[:5],
            "retries_missing_attempts": len(self.missing_attempts),
            "missing_examples": self.missing_attempts[:5],
            "fence_timeouts": self.fence_timeouts,
            "catch_up": [
                {"member": c.member, "records": c.records, "seconds": c.seconds, "cpu_s": c.cpu_s}
                for c in self.catch_ups
            ],
            "events": self.events,
            "seconds": round(self.seconds, 1),
        }


def state_topics(topics: Topics, service: str) -> dict[str, str]:
    """The state loops of a service -> the topic each reads."""
    if service == "retriever":
        return {
            "learning-injections": topics.context_injected,
            "learning-outcomes": topics.outcome_recorded,
            "memory": topics.memory_upserted,
            "memory-curation": topics.memory_curated,
        }
    return {"attempts": topics.attempt_recorded, "task-outcomes": topics.outcome_recorded}


class Offsets:
    """Topic ends now and consumer groups' committed offsets, looked up without joining any group."""

    def __init__(self, config: KafkaClientConfig) -> None:
        self._config = config
        self._ends: dict[str, TopicEnds] = {}
        self._groups: dict[str, AIOKafkaConsumer] = {}

    async def ends(self, topic: str) -> dict[int, int]:
        if topic not in self._ends:
            self._ends[topic] = TopicEnds(self._config, topic, client_id="bench-fleet-ends")
        return await self._ends[topic].ends()

    async def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        consumer = self._groups.get(group)
        if consumer is None:
            consumer = AIOKafkaConsumer(**self._config.consumer("bench-fleet-offsets", group))
            await consumer.start()
            self._groups[group] = consumer
        found = {}
        for p in partitions:
            try:
                found[p] = await asyncio.wait_for(consumer.committed(TopicPartition(topic, p)), 5.0) or 0
            except (KafkaError, TimeoutError):
                found[p] = -1
        return found

    async def behind(self, member: FleetMember, topics: Topics, targets: Mapping[str, dict[int, int]]) -> int | None:
        """Records the member's state loops have yet to commit up to ``targets`` (topic -> ends); None while its
        loops have not all named their groups yet."""
        groups = member.groups()
        loops = state_topics(topics, member.service)
        if not all(loop in groups for loop in loops):
            return None
        left = 0
        for loop, topic in loops.items():
            ends = targets[topic]
            done = await self.committed(groups[loop], topic, sorted(ends))
            left += sum(max(0, end - done[p]) if done[p] >= 0 else end for p, end in ends.items())
        return left

    async def close(self) -> None:
        for ends in self._ends.values():
            await ends.stop()
        for consumer in self._groups.values():
            await consumer.stop()


class FleetRun:
    def __init__(
        self, plan: FleetPlan, config: KafkaClientConfig, root: Path, template: Path, say: Callable[[str], None]
    ) -> None:
        self.plan, self.config, self.root, self.template, self.say = plan, config, root, template, say
        self.topics = Topics(f"fleet{uuid.uuid4().hex[:8]}")
        env = fleet_env(self.topics.prefix, config.bootstrap_servers, plan.partitions, FENCE_WAIT_S)
        self.fleet = Fleet(root / "members", env, template)
        self.offsets = Offsets(config)
        self.seen = Watch()
        self.events: list[str] = []
        self.catch_ups: list[CatchUp] = []
        self.t0 = time.monotonic()

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:.0f} s: {text}"
        self.events.append(line)
        self.say(line)

    async def _ready(self, *members: FleetMember) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(m.ready() for m in members):
            gone = self.fleet.unexpected_exits()
            if gone:
                raise FleetError("\n".join(gone))
            if time.monotonic() > deadline:
                raise FleetError(f"{[m.name for m in members if not m.ready()]} not ready")
            await asyncio.sleep(0.2)

    async def _targets(self, service: str) -> dict[str, dict[int, int]]:
        return {topic: await self.offsets.ends(topic) for topic in set(state_topics(self.topics, service).values())}

    async def _catch_up(self, member: FleetMember, targets: dict[str, dict[int, int]]) -> None:
        """Time the member until its state loops committed ``targets``."""
        record = CatchUp(member.name, sum(sum(ends.values()) for ends in targets.values()))
        self.catch_ups.append(record)
        while member.running():
            left = await self.offsets.behind(member, self.topics, targets)
            if left == 0:
                record.seconds = round(time.monotonic() - member.started, 2)
                cpu = process_cpu_s(member.proc.pid)
                record.cpu_s = None if cpu is None else round(cpu, 2)
                self._note(
                    f"{member.name} caught up on {record.records} records in {record.seconds} s ({record.cpu_s} s CPU)"
                )
                return
            await asyncio.sleep(0.2)

    async def _join(self, service: str) -> tuple[FleetMember, asyncio.Task[None]]:
        targets = await self._targets(service)
        member = self.fleet.start(service)
        self._note(f"{member.name} joins")
        return member, asyncio.create_task(self._catch_up(member, targets))

    async def _disturb(self, load: Load) -> list[asyncio.Task[None]]:
        """SIGKILL a retriever and an injector at 30% of the load, restart the retriever on its own directory at
        45%, a fresh retriever and injector join at 60%."""
        total, timers = self.plan.requests, []

        async def at(share: float) -> None:
            while load.progress < share * total:
                await asyncio.sleep(0.05)

        await at(0.3)
        victims = [self.fleet.live("retriever")[-1], self.fleet.live("injector")[-1]]
        for victim in victims:
            victim.kill()
            self._note(f"SIGKILL {victim.name}")
        await at(0.45)
        again = self.fleet.restart(victims[0])
        self._note(f"{again.name} restarts on its own directory")
        await at(0.6)
        for service in ("retriever", "injector"):
            _, timer = await self._join(service)
            timers.append(timer)
        return timers

    async def _drained(self, sent: Sent) -> None:
        last, changed = -1, time.monotonic()
        while True:
            answered = sum(1 for cid in sent.requests if cid in self.seen.injected_at)
            if answered == len(sent.requests):
                return
            if answered != last:
                last, changed = answered, time.monotonic()
            elif time.monotonic() - changed > STUCK_S:
                raise FleetError(f"{len(sent.requests) - answered} requests never answered")
            await asyncio.sleep(0.2)

    async def _converged(self) -> None:
        """Until every live member's state loops committed everything their topics hold."""
        last, changed = -1, time.monotonic()
        while True:
            left = 0
            for member in self.fleet.live():
                behind = await self.offsets.behind(member, self.topics, await self._targets(member.service))
                left += 1 if behind is None else behind
            if left == 0:
                return
            if left != last:
                last, changed = left, time.monotonic()
            elif time.monotonic() - changed > STUCK_S:
                raise FleetError(f"members still {left} records behind")
            await asyncio.sleep(0.5)

    async def execute(self, embedder: Embedder) -> FleetResult:
        plan = self.plan
        await ensure_topics(self.config, self.topics.all(), partitions=plan.partitions, replication=1)
        first = [self.fleet.start("retriever") for _ in range(plan.retrievers)]
        first += [self.fleet.start("injector") for _ in range(plan.injectors)]
        stop_watch = asyncio.Event()
        watcher = asyncio.create_task(
            watch(self.config, (self.topics.context_injected,), self.topics.context_injected, self.seen, stop_watch)
        )
        try:
            await self._ready(*first)
            self._note(f"{plan.retrievers} retrievers and {plan.injectors} injectors ready")
            async with EventPublisher(self.config, "bench-fleet") as publisher:
                load = Load(publisher, self.topics, PROJECT, plan.requests, plan.window, self.seen)
                disturbing = asyncio.create_task(self._disturb(load))
                sent = await load.run()
                timers = await disturbing
            await self._drained(sent)
            self._note(f"{len(sent.requests)} requests answered")
            if plan.final_join:
                _, timer = await self._join("retriever")
                timers.append(timer)
            await asyncio.gather(*timers)
            await self._converged()
            self._note("every member committed every record of its state topics")
            if self.fleet.unexpected_exits():
                raise FleetError("\n".join(self.fleet.unexpected_exits()))
            fence_timeouts = sum(m.count(b'"precontext_fence_timeout"') for m in self.fleet.lives)
            await asyncio.to_thread(self.fleet.stop_all)
        finally:
            stop_watch.set()
            await watcher
            await self.offsets.close()
            self.fleet.kill_all()
        return await self._compare(sent, embedder, fence_timeouts)

    async def _compare(self, sent: Sent, embedder: Embedder, fence_timeouts: int) -> FleetResult:
        decode = EventDeserializer()

        async def events(topic: str) -> list[AnyEnvelope]:
            return [decode(r.value) for r in await read_topic(self.config, topic)]

        injected = await events(self.topics.context_injected)
        outcomes = await events(self.topics.outcome_recorded)
        upserts = await events(self.topics.memory_upserted)
        contexts = {
            str(e.correlation_id): e.payload.context for e in injected if isinstance(e.payload, ContextInjected)
        }
        retrievers = {m.name: m.data_dir for m in self.fleet.lives if m.service == "retriever"}
        learned = {name: member_learned(data_dir, PROJECT) for name, data_dir in sorted(retrievers.items())}
        reference = await single_member(
            self.template, self.root / "single", embedder, upserts, injected, outcomes, PROJECT
        )
        base = member_learned(self.template, PROJECT)
        return FleetResult(
            sent=sent,
            members=sorted(learned),
            items=len(reference),
            moved=moved(reference, base),
            disagreements=disagreements(learned, reference),
            missing_attempts=missing_attempts(sent.retries, contexts),
            fence_timeouts=fence_timeouts,
            catch_ups=self.catch_ups,
            events=self.events,
            seconds=time.monotonic() - self.t0,
        )
