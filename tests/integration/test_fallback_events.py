"""Fallback injections reach the bus (issue 25): an answer from the learned-pattern file, given while the
stack was down (by the hook client) or while the pipeline was silent (by the gateway), is published as a
``context.injected`` event once the gateway and its broker are there, exactly once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, ContextSource, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.gateway.sync_state import SyncState
from ctxbus.hooks import spool
from ctxbus.observability import Metrics
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import Resources, run_gateway

from .kafka_io import read_all
from .slack import ROOMY_HOOK_MS
from .test_hooks import context_of, hook_env, make_repo, prompt_input, run_hook
from .test_pattern_sync import gateway

pytestmark = pytest.mark.integration


async def injected_events(kafka: KafkaClientConfig, topics: Topics, expect: int) -> list[Envelope[ContextInjected]]:
    out = []
    for record in await read_all(kafka, topics.context_injected, expect=expect, timeout_s=20):
        event = EventDeserializer()(record.value)
        assert isinstance(event.payload, ContextInjected)
        out.append(event)
    return out


async def until_shipped(data_dir: Path) -> None:
    for _ in range(200):
        if spool.pending(str(data_dir)) == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"still spooled: {spool.pending(str(data_dir))}")


async def test_a_fallback_answered_with_the_stack_down_is_on_the_topic_once_the_gateway_is_back(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    # the stack is down: nothing listens where the client looks for its gateway
    env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{free_port()}")
    done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo), repo)
    assert "### Password reset revokes sessions" in context_of(done)
    assert spool.pending(str(settings.data_dir)) == 1
    assert await read_all(kafka, topics.context_injected, expect=1, timeout_s=1) == []  # nothing reached the bus

    gw = settings.model_copy(update={"gateway": GatewaySettings(port=0)})
    stop, ports = asyncio.Event(), []
    task = asyncio.create_task(run_gateway(gw, kafka, Metrics(), stop, on_ready=ports.append))
    try:
        while not ports:
            await asyncio.sleep(0.05)
        await until_shipped(settings.data_dir)
        await asyncio.sleep(2.5)  # at least one more round of the shipper: nothing is shipped twice
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    (event,) = await injected_events(kafka, topics, expect=1)
    p = event.payload
    assert (event.project, event.session_id, event.producer.service) == ("acme/web", "sess-9", "gateway")
    assert p.context_source is ContextSource.FALLBACK_STATIC and p.trigger is Trigger.USER_PROMPT
    assert "### Password reset revokes sessions" in p.context and p.pattern_count == 1
    assert p.context_size_bytes == len(p.context.encode()) and p.min_confidence_threshold == 0.7
    assert not list((settings.data_dir / spool.SPOOL_DIR).glob("*.json*"))


async def test_the_gateways_own_fallback_is_published_under_its_requests_correlation_id(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    gw = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=700, min_confidence=0.5)}
    )
    stop, ports = asyncio.Event(), []
    task = asyncio.create_task(run_gateway(gw, kafka, Metrics(), stop, on_ready=ports.append))  # no pipeline
    try:
        while not ports:
            await asyncio.sleep(0.05)
        env = hook_env(tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{ports[0]}", CTXBUS_HOOK_TIMEOUT_MS="700")
        done, _ = await asyncio.to_thread(run_hook, env, "user-prompt-submit", prompt_input(repo), repo)
        assert "### Password reset revokes sessions" in context_of(done)
        await until_shipped(settings.data_dir)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    (request_record,) = await read_all(kafka, topics.retrieval_requested, expect=1)
    request = EventDeserializer()(request_record.value)
    (event,) = await injected_events(kafka, topics, expect=1)
    assert event.correlation_id == request.correlation_id and event.causation_id == request.event_id
    assert event.payload.context_source is ContextSource.PERSISTENCE_FILE
    assert event.payload.min_confidence_threshold == 0.5  # the threshold the file was read with
    assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] == event.payload.context


async def test_a_session_start_the_pipeline_answers_empty_gets_the_file_and_that_answer_is_published(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, topics: Topics, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path, project="weak/app")
    # its pattern file counts as synced already (the state says so), so the store holds nothing of it: the
    # pipeline answers the session start with an empty context, and the gateway answers from the file
    state = SyncState(settings.data_dir / "pattern-sync", ".claude/learned_patterns.json", Path.home())
    pending = state.pending(str(repo), "weak/app")
    assert pending is not None
    state.record("weak/app", pending)
    async with gateway(settings, kafka, timeout_ms=ROOMY_HOOK_MS) as port:
        env = hook_env(
            tmp_path, CTXBUS_GATEWAY_URL=f"http://127.0.0.1:{port}", CTXBUS_HOOK_TIMEOUT_MS=str(ROOMY_HOOK_MS)
        )
        start = json.dumps({"session_id": "s-0", "cwd": str(repo), "hook_event_name": "SessionStart"}).encode()
        done, _ = await asyncio.to_thread(run_hook, env, "session-start", start, repo)
        assert "### Password reset revokes sessions" in context_of(done, "SessionStart")
        await until_shipped(settings.data_dir)
    empty, fallback = await injected_events(kafka, topics, expect=2)  # the pipeline's, then the file's
    assert not empty.payload.context and empty.payload.empty_reason
    assert fallback.correlation_id == empty.correlation_id and fallback.causation_id == empty.event_id
    assert fallback.payload.context_source is ContextSource.PERSISTENCE_FILE
    assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] == fallback.payload.context
