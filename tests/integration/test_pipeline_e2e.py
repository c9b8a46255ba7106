"""The whole pipeline on a real broker and a real Qdrant Edge store with real embeddings."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    ContextInjected,
    ContextSource,
    MemoryUpserted,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)
from ctxbus.contract.serde import EventDeserializer, header_value
from ctxbus.contract.topics import Topics
from ctxbus.core.fingerprint import HASHED_COMPONENTS
from ctxbus.core.profiles import resolve_profile
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .kafka_io import read_all

pytestmark = pytest.mark.integration

ACME_PATTERNS = """{
  "version": "1.0.0",
  "last_updated": "2026-01-26T12:00:00Z",
  "patterns": [
    {"pattern_id": "reset-invalidates-sessions", "domain": "auth", "title": "Password reset invalidates sessions",
     "description": "After a password reset, revoke every refresh token and clear the session cache before login.",
     "confidence": 0.92, "usage_count": 15, "success_rate": 0.87, "example_reference": "src/auth/reset.py:45"},
    {"pattern_id": "login-rate-limit", "domain": "auth", "title": "Login rate limiting",
     "description": "Rate limit login attempts per account and per IP; return 429 with Retry-After.",
     "confidence": 0.85, "usage_count": 9, "success_rate": 0.9},
    {"pattern_id": "migrations-online", "domain": "database", "title": "Online migrations",
     "description": "Add columns nullable first, backfill in batches, then add the constraint.",
     "confidence": 0.8, "usage_count": 4, "success_rate": 0.75}
  ]
}"""

OTHER_PATTERNS = """{
  "version": "1.0.0",
  "patterns": [
    {"pattern_id": "other-login", "domain": "auth", "title": "OTHER PROJECT login secret",
     "description": "After a password reset in the other project, login must use the legacy SSO bridge.",
     "confidence": 0.99, "usage_count": 50, "success_rate": 1.0}
  ]
}"""


@pytest.fixture
async def pipeline(running_pipeline: Resources, embedder: Embedder, tmp_path: Path) -> Resources:
    (tmp_path / "acme.json").write_text(ACME_PATTERNS)
    (tmp_path / "other.json").write_text(OTHER_PATTERNS)
    assert running_pipeline.store is not None
    for name, project in (("acme.json", "acme/web"), ("other.json", "other/app")):
        ingest(parse_pattern_file(tmp_path / name, project=project).items, embedder, running_pipeline.store)
    return running_pipeline


def request(prompt: str, project: str, **kw: object) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="claude-code", prompt=prompt, trigger=Trigger.USER_PROMPT, **kw)  # type: ignore[arg-type]
    return Envelope.root(payload, project=project, session_id="sess-42", producer="test")


async def ask(
    kafka: KafkaClientConfig, topics: Topics, event: Envelope[RetrievalRequested]
) -> Envelope[ContextInjected]:
    return await request_injection(kafka, topics, event, 60, client_id="test")


async def test_request_to_injection_with_the_causation_chain_and_project_isolation(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    req = request("Fix login after password reset", "acme/web", max_items=5)
    injected = await ask(kafka, topics, req)

    completed_records = await read_all(kafka, topics.retrieval_completed, expect=1)
    (completed,) = [EventDeserializer()(r.value) for r in completed_records]
    assert isinstance(completed.payload, RetrievalCompleted)
    # one correlation id along the chain; causation requested -> completed -> injected
    assert req.correlation_id == completed.correlation_id == injected.correlation_id
    assert completed.causation_id == req.event_id
    assert injected.causation_id == completed.event_id
    assert injected.entity_id == completed.entity_id == req.entity_id
    assert injected.session_id == "sess-42" and injected.project == "acme/web"

    p = injected.payload
    assert p.context_source == ContextSource.RAG_QUERY
    assert p.item_ids and p.item_ids[0] == "reset-invalidates-sessions"
    assert "Password reset invalidates sessions" in p.context
    # only this project's memories, ever
    assert "OTHER PROJECT" not in p.context and "other-login" not in p.item_ids
    assert all(item.project == "acme/web" for item in completed.payload.items)
    # bounds
    assert p.context_chars == len(p.context) <= 10_000
    assert p.context_size_bytes == len(p.context.encode())
    assert p.pattern_count == len(p.item_ids) <= 5
    assert 0 <= p.retrieval_duration_ms <= 10_000
    assert p.request_emitted_at == req.emitted_at

    # the recorder keeps a queryable record of it
    assert pipeline.record is not None
    async with asyncio.timeout(15):
        while not (rows := pipeline.record.recent(correlation_id=str(req.correlation_id))):
            await asyncio.sleep(0.05)
    assert rows[0].item_ids == list(p.item_ids)
    assert rows[0].end_to_end_ms is not None and rows[0].end_to_end_ms >= 0


async def test_a_project_without_memories_gets_an_empty_injection_with_a_reason(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    injected = await ask(kafka, topics, request("Fix login after password reset", "empty/project"))
    assert injected.payload.context == ""
    assert injected.payload.context_source == ContextSource.NONE
    assert injected.payload.empty_reason == "no_memories_in_project"


async def test_the_character_budget_is_respected(pipeline: Resources, kafka: KafkaClientConfig, topics: Topics) -> None:
    injected = await ask(kafka, topics, request("password reset login", "acme/web", max_chars=300))
    assert 0 < injected.payload.context_chars <= 300


async def completed_for(
    kafka: KafkaClientConfig, topics: Topics, event: Envelope[RetrievalRequested]
) -> RetrievalCompleted:
    await ask(kafka, topics, event)
    for record in await read_all(kafka, topics.retrieval_completed, expect=1):
        done = EventDeserializer()(record.value)
        if done.correlation_id == event.correlation_id:
            assert isinstance(done.payload, RetrievalCompleted)
            return done.payload
    raise AssertionError("no completion for the request")


async def test_completions_carry_profile_task_type_and_fingerprint(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    done = await completed_for(kafka, topics, request("Fix login after password reset", "acme/web"))
    assert done.profile == "implementer" and done.task_type is TaskType.BUGFIX
    assert 0 < done.task_type_confidence <= 1 and done.fingerprint and len(done.fingerprint) == 16
    assert set(HASHED_COMPONENTS) <= set(done.fingerprint_components)
    assert json.loads(done.fingerprint_components["profile"]) == "implementer"
    given = await completed_for(kafka, topics, request("password reset", "acme/web", task_type=TaskType.REVIEW))
    assert given.task_type is TaskType.REVIEW and given.task_type_confidence == 1.0
    alias = await completed_for(kafka, topics, request("password reset", "acme/web", agent_role="knight"))
    assert alias.profile == resolve_profile("knight").name


async def test_profile_overrides_apply_per_request(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    no_patterns = request(
        "Fix login after password reset", "acme/web", profile_overrides={"excluded_kinds": '["pattern"]'}
    )
    done = await completed_for(kafka, topics, no_patterns)
    assert done.items == () and done.empty_reason in {"no_memories_in_project", "nothing_relevant_enough"}


async def test_an_unknown_profile_is_dead_lettered_with_the_valid_names(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.retrieval_requested, request("anything", "acme/web", agent_role="wizard"))
    (dead,) = await read_all(kafka, topics.dead_letter, expect=1)
    message = header_value(list(dead.headers), "ctxbus-dlq-error-message") or ""
    assert "wizard" in message and "implementer" in message and "reviewer" in message


async def test_memory_upserts_through_the_bus_stay_in_their_tenant(
    pipeline: Resources, kafka: KafkaClientConfig, topics: Topics
) -> None:
    own = MemoryItem(
        id="csrf",
        project="acme/web",
        kind=MemoryKind.WARNING,
        title="CSRF on login",
        content="The login form needs the CSRF token refreshed after a password reset.",
        confidence=0.9,
    )
    foreign = own.model_copy(update={"id": "sneaky", "project": "other/app"})
    async with EventPublisher(kafka, "test") as pub:
        for items in ((own,), (foreign,)):
            event = Envelope.root(MemoryUpserted(items=items), project="acme/web", session_id="import", producer="t")
            await pub.publish(topics.memory_upserted, event)
    # every upsert is answered; the foreign item is rejected with the reason, never stored
    answers = [EventDeserializer()(r.value).payload for r in await read_all(kafka, topics.memory_stored, expect=2)]
    results = sorted((r for a in answers for r in a.results), key=lambda r: r.id)  # type: ignore[union-attr]
    assert [(r.id, r.action.value) for r in results] == [("csrf", "added"), ("sneaky", "rejected")]
    assert "may write only that project" in (results[1].reason or "")
    assert await read_all(kafka, topics.dead_letter, expect=0, timeout_s=1) == []
    assert pipeline.store is not None
    async with asyncio.timeout(30):
        while not pipeline.store.get("acme/web", ["csrf"]):
            await asyncio.sleep(0.1)
    assert pipeline.store.get("other/app", ["sneaky"]) == []
    injected = await ask(kafka, topics, request("CSRF token after password reset login form", "acme/web"))
    assert "csrf" in injected.payload.item_ids


async def test_a_failed_approach_arrives_as_a_warning(
    pipeline: Resources, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics
) -> None:
    assert pipeline.store is not None
    failed = MemoryItem(
        id="cron-refresh",
        project="acme/web",
        kind=MemoryKind.LEARNING,
        title="Token refresh from a cron job",
        content="Refreshing login tokens from a cron job after a password reset raced with logins.",
        outcome=Outcome.FAILED,
        confidence=0.8,
    )
    ingest([failed], embedder, pipeline.store)
    injected = await ask(kafka, topics, request("token refresh after password reset login", "acme/web"))
    text = injected.payload.context
    assert "cron-refresh" in injected.payload.item_ids
    assert text.index("## Warnings") < text.index("### Past issue: Token refresh from a cron job")
