"""Past one process: several retrievers and injectors in one consumer group per service share the partitions,
and a rebalance under load (a member joins, one leaves on SIGTERM, one dies on SIGKILL) loses nothing,
duplicates nothing and keeps each session's order (issue 11).

Real parts only: one embedded broker, a request topic of six partitions, every member a ``ctxbus run
retriever|injector`` process. The store: a Qdrant Edge shard has one owner at a time and no server can run
here, so each retriever process opens its own copy of one store loaded with the same memories (the design
docs/deployment.md's "Scaling out" describes; in production the retrievers share a Qdrant server instead).
Which member handled a message is read from its log (``processed`` lines at DEBUG name the correlation id).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.bench.chaos_load import Watch, read_topic, send_until_acknowledged, watch
from ctxbus.bench.corpus import prompts
from ctxbus.bench.stack import PROJECT, load_memories
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings, Settings

from .scale_members import Handled, Member, Members, member_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 6
#: requests per second, each of one of SESSIONS sessions (the key: sessions spread over the partitions)
RATE = 3.0
SESSIONS = 24
MEMORIES = 200
#: the load never runs longer than this (bounded, whatever happens)
MAX_LOAD_S = 300.0
READY_TIMEOUT_S = 240.0
DRAIN_TIMEOUT_S = 240.0
#: after a rebalance, a moment for the members to fetch from their new partitions
SETTLE_S = 2.0
#: how long both members of each group run side by side, the spread measured over it
WINDOW_S = 20.0
#: after the SIGKILL: the group notices the dead member (session timeout, 10 s) and reassigns its partitions
AFTER_KILL_S = 18.0
#: the least share of the window's messages each member must have handled
MIN_SHARE = 0.1


def request(i: int, domain: str, prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(
        agent_name="scale-out", domain=domain, prompt=prompt, trigger=Trigger.USER_PROMPT, max_items=5
    )
    return Envelope.root(payload, project=PROJECT, session_id=f"scale-{i % SESSIONS}", producer="test-scale-out")


class Load:
    """A steady, bounded request load; each request acknowledged before the next is due."""

    def __init__(self, publisher: EventPublisher, topic: str) -> None:
        self._publisher, self._topic = publisher, topic
        self.sent: list[str] = []
        self.unsent = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        started = time.perf_counter()
        for i, (domain, prompt) in enumerate(prompts(int(RATE * MAX_LOAD_S))):
            delay = started + i / RATE - time.perf_counter()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), delay)
            if self.stop.is_set():
                return
            event = request(i, domain, prompt)
            if await send_until_acknowledged(self._publisher, self._publisher.prepare(self._topic, event)):
                self.sent.append(str(event.correlation_id))
            else:
                self.unsent += 1


async def ready(members: Members, *wanted: Member) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not all(m.ready() for m in wanted):
        gone = members.unexpected_exits()
        assert not gone, "\n".join(gone)
        late = [m.name for m in wanted if not m.ready()]
        assert time.monotonic() < deadline, f"{late} not ready after {READY_TIMEOUT_S:.0f} s"
        await asyncio.sleep(0.2)


async def rebalanced(members: Members, since: datetime, *group: Member) -> None:
    """Wait until every member of a group got its partitions again after ``since`` (a join rebalances the old
    members too; an old one first finishes its batch in flight)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not all(m.assigned_since(since) for m in group):
        gone = members.unexpected_exits()
        assert not gone, "\n".join(gone)
        late = [m.name for m in group if not m.assigned_since(since)]
        assert time.monotonic() < deadline, f"{late} not reassigned after {READY_TIMEOUT_S:.0f} s"
        await asyncio.sleep(0.2)
    await asyncio.sleep(SETTLE_S)


async def drain(load: Load, seen: Watch) -> list[str]:
    """Wait until every request sent has an injection; the ones still unanswered at the timeout."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        missing = [cid for cid in load.sent if cid not in seen.injected_at]
        if not missing:
            return []
        await asyncio.sleep(0.5)
    return [cid for cid in load.sent if cid not in seen.injected_at]


def shares(members: Sequence[Member], since: datetime, until: datetime) -> dict[str, int]:
    """Messages each member handled within [since, until]."""
    return {m.name: sum(1 for h in m.handled() if since <= h.at <= until) for m in members}


def per_session(records: Sequence[ConsumerRecord[bytes, bytes]]) -> dict[str, list[str]]:
    """Session -> correlation ids in log order (a session's records share one partition: its key)."""
    deserialize = EventDeserializer()
    partitions: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for rec in records:
        event = deserialize(rec.value)
        partitions[event.session_id].add(rec.partition)
        order[event.session_id].append((rec.offset, str(event.correlation_id)))
    split = {s: sorted(p) for s, p in partitions.items() if len(p) > 1}
    assert not split, f"sessions on more than one partition: {split}"
    return {s: [cid for _, cid in sorted(items)] for s, items in order.items()}


def correlation_counts(records: Sequence[ConsumerRecord[bytes, bytes]]) -> Counter[str]:
    deserialize = EventDeserializer()
    return Counter(str(deserialize(rec.value).correlation_id) for rec in records)


@pytest.mark.timeout(900)
async def test_members_share_partitions_and_rebalances_under_load_lose_and_duplicate_nothing(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    prefix = f"so{uuid.uuid4().hex[:8]}"
    topics = Topics(prefix)
    kafka = KafkaSettings(
        bootstrap_servers=broker.bootstrap_servers,
        enable_idempotence=False,
        fetch_max_wait_ms=5,
        topic_partitions=PARTITIONS,
    )
    config = KafkaClientConfig(kafka, broker.bootstrap_servers, embedded=True)
    await ensure_topics(config, topics.all(), compacted=(topics.schemas,), partitions=PARTITIONS, replication=1)
    template = tmp_path / "store-template"
    await asyncio.to_thread(load_memories, Settings(data_dir=template, topic_prefix=prefix), MEMORIES)
    members = Members(tmp_path / "members", member_env(prefix, broker.bootstrap_servers, PARTITIONS), template)
    seen, stop_watch = Watch(), asyncio.Event()
    watcher = asyncio.create_task(watch(config, (topics.context_injected,), topics.context_injected, seen, stop_watch))
    try:
        r0, i0 = members.start("retriever"), members.start("injector")
        await ready(members, r0, i0)
        async with EventPublisher(config, "test-scale-out") as publisher:
            load = Load(publisher, topics.retrieval_requested)
            loading = asyncio.create_task(load.run())
            await asyncio.sleep(6.0)
            # a second member joins each group mid-load
            joined_at = datetime.now(UTC)
            r1, i1 = members.start("retriever"), members.start("injector")
            await ready(members, r1, i1)
            await rebalanced(members, joined_at, r0, r1, i0, i1)
            window_from = datetime.now(UTC)
            await asyncio.sleep(WINDOW_S)
            window_to = datetime.now(UTC)
            # the first members leave on SIGTERM (finish the batch, commit, close)
            codes = await asyncio.gather(asyncio.to_thread(r0.terminate), asyncio.to_thread(i0.terminate))
            assert list(codes) == [0, 0], f"SIGTERM exit codes {codes}"
            await asyncio.sleep(5.0)
            joined_at = datetime.now(UTC)
            r2, i2 = members.start("retriever"), members.start("injector")
            await ready(members, r2, i2)
            await rebalanced(members, joined_at, r1, r2, i1, i2)
            # the second members die on SIGKILL, with the load flowing; the third take their partitions over
            killed_at = datetime.now(UTC)
            await asyncio.gather(asyncio.to_thread(r1.kill), asyncio.to_thread(i1.kill))
            await asyncio.sleep(AFTER_KILL_S)
            load.stop.set()
            await loading
        unanswered = await drain(load, seen)
        assert not members.unexpected_exits(), "\n".join(members.unexpected_exits())
        stop_codes = await asyncio.to_thread(members.stop_all)
    finally:
        stop_watch.set()
        await watcher
        members.kill_all()
    requested = await read_topic(config, topics.retrieval_requested)
    completed = await read_topic(config, topics.retrieval_completed)
    injected = await read_topic(config, topics.context_injected)
    dead = await read_topic(config, topics.dead_letter)

    # (a) the requests spread over the members of each group while two ran side by side
    retrievers = shares([r0, r1], window_from, window_to)
    injectors = shares([i0, i1], window_from, window_to)
    split = f"window {WINDOW_S:.0f} s: retrievers {retrievers}, injectors {injectors}"
    for counts in (retrievers, injectors):
        total = sum(counts.values())
        assert total >= 10, split
        assert all(n >= MIN_SHARE * total for n in counts.values()), split
    # ... and the members that joined last took the killed members' partitions over
    for member in (r2, i2):
        after: list[Handled] = [h for h in member.handled() if h.at > killed_at]
        assert after, f"{member.name} handled nothing after the SIGKILL; {split}"

    # (b) every request: exactly one completion and one injection; nothing dead-lettered
    sent = load.sent
    assert load.unsent == 0 and len(sent) >= RATE * 40, f"sent {len(sent)}, unsent {load.unsent}"
    assert unanswered == [], f"{len(unanswered)} of {len(sent)} requests never injected: {unanswered[:5]}"
    completions, injections = correlation_counts(completed), correlation_counts(injected)
    assert {cid: n for cid, n in completions.items() if n != 1} == {}, "completed more than once"
    assert {cid: n for cid, n in injections.items() if n != 1} == {}, "injected more than once"
    assert set(completions) == set(sent) == set(injections)
    assert dead == [], f"{len(dead)} dead letters"
    # ... in each session's order
    assert per_session(injected) == per_session(requested)
    assert set(stop_codes.values()) == {0}, f"exit codes on SIGTERM: {stop_codes}"
    print(
        f"\nscale-out: {len(sent)} requests, {split}; {sum(m.count(b'duplicate_skipped') for m in members.all)} "
        f"redeliveries recognised; SIGTERM {r0.name}, {i0.name}; SIGKILL {r1.name}, {i1.name}"
    )
