"""The injector spends the budget the way the request's profile says (seed 004): one completed event,
two profiles, two different tier splits, through the real broker and the real tokenizer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.budget import COMPRESSION_MARKER
from ctxbus.core.profiles import resolve_profile
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.wiring import Resources, run_services

from .kafka_io import read_all

pytestmark = pytest.mark.integration

#: every item the same size, alternating project and task memory in rank order
SUBJECTS = ["login", "refresh", "logout", "sessions", "cookies", "tokens", "roles", "audit", "keys", "scopes"]


def ranked(n: int, tier: str, rank: int, subject: str) -> RankedItem:
    return RankedItem(
        id=f"{tier}-{n}",
        project="acme/web",
        kind="principle",
        title=f"{subject.title()} rule",
        content=f"Keep the {subject} handler small and test it with the real database.",
        confidence=0.9,
        importance=0.5,
        score=1.0 - rank / 100,
        breakdown={f"tier_{tier}": 1.0},
    )


def items() -> tuple[RankedItem, ...]:
    out: list[RankedItem] = []
    for n in range(8):
        out.append(ranked(n, "project", len(out), SUBJECTS[n % len(SUBJECTS)]))
        out.append(ranked(n, "task", len(out), SUBJECTS[(n + 5) % len(SUBJECTS)]))
    return tuple(out)


def completed(role: str, max_tokens: int, **request: Any) -> Envelope[RetrievalCompleted]:
    req = RetrievalRequested(
        agent_name="claude-code",
        agent_role=role,
        prompt="Tidy up the auth handlers",
        trigger=Trigger.USER_PROMPT,
        max_tokens=max_tokens,
        max_items=16,
        prime=True,
        include={"suggested_approach": False},
        **request,
    )
    payload = RetrievalCompleted(
        request=req,
        request_emitted_at=datetime.now(UTC),
        items=items(),
        retrieval_duration_ms=1.0,
        embedding_model="test",
        profile=resolve_profile(role).name,
    )
    return Envelope.root(payload, project="acme/web", session_id=f"s-{role}", producer="test")


@pytest.fixture
async def injector(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> AsyncIterator[None]:
    """Only the injector, as the stack runs it (wiring's handler, the embedder's tokenizer)."""
    metrics = Metrics()
    stop, ready = asyncio.Event(), asyncio.Event()
    res = Resources(settings=settings, metrics=metrics, embedder=embedder)
    task = asyncio.create_task(run_services(("injector",), settings, kafka, metrics, stop, res, on_ready=ready.set))
    await asyncio.wait_for(ready.wait(), 60)
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def inject(
    kafka: KafkaClientConfig, topics: Topics, events: list[Envelope[RetrievalCompleted]]
) -> list[ContextInjected]:
    async with EventPublisher(kafka, "test") as pub:
        for event in events:
            await pub.publish(topics.retrieval_completed, event)
    by_correlation: dict[object, ContextInjected] = {}
    for record in await read_all(kafka, topics.context_injected, expect=len(events), timeout_s=30):
        out = EventDeserializer()(record.value)
        assert isinstance(out.payload, ContextInjected)
        by_correlation[out.correlation_id] = out.payload
    return [by_correlation[e.correlation_id] for e in events]


async def test_a_reviewer_and_an_implementer_split_the_same_budget_differently(
    injector: None, kafka: KafkaClientConfig, topics: Topics
) -> None:
    max_tokens = 300
    implementer, reviewer = await inject(
        kafka, topics, [completed("implementer", max_tokens), completed("reviewer", max_tokens)]
    )
    budgets = {}
    for name, injected in (("implementer", implementer), ("reviewer", reviewer)):
        assert injected.prime is not None
        budget = json.loads(injected.prime)["budget"]
        budgets[name] = {t["tier"]: t for t in budget["tiers"]}
        assert budget["profile"] == name
        # both preserve six items (3 + 3, 4 + 2): the first six given, whatever their tier
        assert budget["preserved"] == [i.id for i in items()[:6]]
        assert set(budget["preserved"]) <= set(injected.item_ids)
        assert injected.token_estimate <= max_tokens and injected.item_ids
        assert {x["reason"] for x in budget["left_out"]} <= {"tier_budget", "over_budget"}
        assert budgets[name]["global"]["allocated"] == 0  # no global items: no share wasted on them
    # seed 004: the implementer weighs task memory 0.5 : 0.3, the reviewer 0.4 : 0.4
    assert budgets["implementer"]["task"]["allocated"] > budgets["reviewer"]["task"]["allocated"]
    assert budgets["implementer"]["project"]["allocated"] < budgets["reviewer"]["project"]["allocated"]
    assert budgets["implementer"]["task"]["items"] > budgets["reviewer"]["task"]["items"]
    assert implementer.item_ids != reviewer.item_ids


async def test_compression_follows_the_profile_and_its_overrides(
    injector: None, kafka: KafkaClientConfig, topics: Topics
) -> None:
    long = " ".join(
        [
            "Keep every auth handler small and test it against the real database.",
            "Mocks hid two session bugs last quarter.",
            "For example, the logout mock never cleared the cookie, so the bug shipped.",
            "Run the handler tests before each merge and after each schema change.",
        ]
    )
    long_items = tuple(i.model_copy(update={"content": long}) for i in items())

    def event(role: str, **request: Any) -> Envelope[RetrievalCompleted]:
        base = completed(role, 400, **request)
        return Envelope.root(
            base.payload.model_copy(update={"items": long_items}), project="acme/web", session_id=role, producer="t"
        )

    implementer, helper, no_compression = await inject(
        kafka,
        topics,
        [event("implementer"), event("helper"), event("implementer", profile_overrides={"allow_compression": "false"})],
    )
    assert implementer.truncated and COMPRESSION_MARKER in implementer.context
    assert implementer.prime is not None and json.loads(implementer.prime)["budget"]["compressed"]
    for whole in (helper, no_compression):
        assert COMPRESSION_MARKER not in whole.context
        assert whole.prime is not None and json.loads(whole.prime)["budget"]["compressed"] == []
    assert len(implementer.item_ids) > len(no_compression.item_ids)
