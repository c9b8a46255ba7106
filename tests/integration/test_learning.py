"""Learning from outcomes through the bus: an outcome moves the injected items; replay rebuilds the same state."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    Outcome,
    OutcomeRecorded,
    RetrievalRequested,
    Trigger,
)
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.learning import InjectionFact, OutcomeFact, feedback_counts, learned_conviction
from ctxbus.learning.handler import LearningHandler
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.wiring import Resources

from .kafka_io import read_all

pytestmark = pytest.mark.integration

ITEMS = [
    MemoryItem(
        id="redis-cache",
        project="acme",
        kind=MemoryKind.PATTERN,
        confidence=0.7,
        content="Cache user permission lookups in Redis with a five minute TTL.",
    ),
    MemoryItem(
        id="never-log-roles",
        project=GLOBAL_PROJECT,
        kind=MemoryKind.PRINCIPLE,
        confidence=0.7,
        content="Never log user permission sets or Redis cache keys holding them.",
    ),
    MemoryItem(
        id="sql-index",
        project="acme",
        kind=MemoryKind.PATTERN,
        confidence=0.7,
        content="Add a composite index on (tenant_id, created_at) for the audit log query.",
    ),
]


async def ask(kafka: KafkaClientConfig, topics: Topics, session: str, prompt: str) -> Envelope[ContextInjected]:
    payload = RetrievalRequested(agent_name="t", prompt=prompt, trigger=Trigger.USER_PROMPT, task_id=f"task-{session}")
    request = Envelope.root(payload, project="acme", session_id=session, producer="test")
    return await request_injection(kafka, topics, request, 60, client_id="t")


async def tell(kafka: KafkaClientConfig, topics: Topics, session: str, outcome: Outcome, **kw: object) -> None:
    payload = OutcomeRecorded(outcome=outcome, source="test", **kw)  # type: ignore[arg-type]
    async with EventPublisher(kafka, "t") as publisher:
        await publisher.publish(
            topics.outcome_recorded, Envelope.root(payload, project="acme", session_id=session, producer="test")
        )


async def test_outcomes_move_the_injected_items_and_replay_rebuilds_the_same_feedback(
    running_pipeline: Resources, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> None:
    store = running_pipeline.store
    assert store is not None
    ingest(ITEMS, embedder, store)
    cache_prompt = "Speed up the permission checks with a Redis cache"
    first = await ask(kafka, topics, "s1", cache_prompt)
    assert first.payload.item_ids[0] == "redis-cache" and first.payload.task_id == "task-s1"
    assert "never-log-roles" in first.payload.item_ids and first.payload.global_item_ids == ("never-log-roles",)
    await ask(kafka, topics, "s2", cache_prompt)
    await tell(kafka, topics, "s1", Outcome.FAILED)
    await tell(kafka, topics, "s2", Outcome.FAILED)
    await tell(kafka, topics, "s2", Outcome.FAILED)  # another outcome of the same session counts too
    await tell(kafka, topics, "nobody", Outcome.SUCCESSFUL)  # no injection: nothing to learn
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # each item's feedback is written in turn: wait for the last one too
        (cached,) = store.get("acme", ["redis-cache"])
        (global_item,) = store.get(GLOBAL_PROJECT, ["never-log-roles"])
        learned = cached.feedback.failures == 3 and global_item.feedback.failures == 3
        if learned or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.2)
    assert (cached.feedback.uses, cached.feedback.failures, cached.feedback.successes) == (3, 3, 0)
    assert learned_conviction(cached) < 0.7  # the ranking now trusts it less (ranking's own test: unit)
    assert store.get("acme", ["sql-index"])[0].feedback.uses == 0  # never injected: untouched
    assert store.get(GLOBAL_PROJECT, ["never-log-roles"])[0].feedback.failures == 3  # the global item learns too

    # replay: a fresh ledger and a fresh store of the same items, the topics read back in another order
    deserialize = EventDeserializer()
    injected = [deserialize(r.value) for r in await read_all(kafka, topics.context_injected, expect=3)]
    outcomes = [deserialize(r.value) for r in await read_all(kafka, topics.outcome_recorded, expect=4)]
    with EdgeVectorStore(tmp_path / "replayed", model_id=embedder.model_id, dim=embedder.dim) as fresh:
        ingest(ITEMS, embedder, fresh)
        ledger = LearningLedger(tmp_path / "learning.sqlite3")
        learner = LearningHandler(ledger, fresh)
        events = [(learner.outcomes, e) for e in outcomes] + [(learner.injections, e) for e in injected]
        random.Random(7).shuffle(events)
        for handler, event in events + events:  # and every event twice: idempotent
            await handler(event)
        ledger.close()
        for item in ITEMS:
            replayed = fresh.get(item.project, [item.id])[0].feedback
            assert replayed == store.get(item.project, [item.id])[0].feedback


def _random_facts(rng: random.Random) -> tuple[list[InjectionFact], list[OutcomeFact]]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def injection(n: int) -> InjectionFact:
        project = rng.choice(["a", "b"])
        ids = rng.sample(["x", "y", "z", "w"], rng.randint(0, 3))
        return InjectionFact(
            f"i{n}",
            project,
            rng.choice(["s1", "s2", "s3"]),
            rng.choice([None, "t1", "t2"]),
            t0 + timedelta(seconds=rng.randint(0, 100)),
            tuple((rng.choice([project, GLOBAL_PROJECT]), i) for i in ids),
        )

    injections = [injection(n) for n in range(40)]
    outcomes = [
        OutcomeFact(
            f"o{n}",
            rng.choice(["a", "b"]),
            rng.choice(["s1", "s2", "s3"]),
            rng.choice([None, "t1", "t2"]),
            rng.choice(["session", "task"]),
            rng.choice(["successful", "partial", "failed", "unknown"]),
            t0 + timedelta(seconds=rng.randint(0, 100)),
        )
        for n in range(25)
    ]
    return injections, outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_ledgers_sql_counts_are_the_core_rule(tmp_path: Path, seed: int) -> None:
    injections, outcomes = _random_facts(random.Random(seed))
    ledger = LearningLedger(tmp_path / "l.sqlite3")
    try:
        for fact in outcomes[:10]:
            ledger.add_outcome(fact)
        for fact in injections:
            ledger.add_injection(fact)
        for fact in outcomes[10:]:
            ledger.add_outcome(fact)
        assert ledger.add_outcome(outcomes[0]) == set()  # a repeat is no news
        expected = feedback_counts(injections, outcomes)
        got = {k: v for k, v in ledger.counts(ledger.all_items()).items() if v.uses}
        assert got == expected
    finally:
        ledger.close()


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_what_a_fact_says_may_have_changed_keeps_the_written_counts_right(tmp_path: Path, seed: int) -> None:
    """The handler writes the counts of the items a fact returns; in any order of facts, what was written ends up
    the rule's counts (and an injection no outcome counts yet changes nothing: it returns no item)."""
    rng = random.Random(seed)
    injections, outcomes = _random_facts(rng)
    facts: list[InjectionFact | OutcomeFact] = [*injections, *outcomes]
    rng.shuffle(facts)
    ledger = LearningLedger(tmp_path / "l.sqlite3")
    written: dict[tuple[str, str], object] = {}
    try:
        for fact in facts:
            keys = ledger.add_injection(fact) if isinstance(fact, InjectionFact) else ledger.add_outcome(fact)
            written.update(ledger.counts(keys))
        expected = feedback_counts(injections, outcomes)
        assert {k: v for k, v in written.items() if v.uses} == expected  # type: ignore[attr-defined]
    finally:
        ledger.close()


def test_an_injection_no_outcome_counts_changes_no_item(tmp_path: Path) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ledger = LearningLedger(tmp_path / "l.sqlite3")
    try:
        assert ledger.add_injection(InjectionFact("i1", "a", "s1", None, t0, (("a", "x"),))) == set()
        ledger.add_outcome(OutcomeFact("o1", "a", "s1", None, "session", "successful", t0 + timedelta(seconds=5)))
        # an outcome of its session at or after it counts it: its items' counts change
        assert ledger.add_injection(InjectionFact("i2", "a", "s1", None, t0, (("a", "y"),))) == {("a", "y")}
        # later than every outcome of its session: nothing counts it yet
        late = InjectionFact("i3", "a", "s1", None, t0 + timedelta(seconds=9), (("a", "z"),))
        assert ledger.add_injection(late) == set()
    finally:
        ledger.close()
