"""Seed 003 through the bus: attempt events are kept (across restarts) and retry, fallback and helper
requests get the pre-context at the start of their injected context."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import AttemptRecorded, AttemptStatus, ContextInjected, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .kafka_io import wait_caught_up

pytestmark = pytest.mark.integration


def attempt(n: int, **kw: object) -> Envelope[AttemptRecorded]:
    payload = AttemptRecorded(
        task_id="api_fix_vehicle_listings", attempt_number=n, provider="gemini", status=AttemptStatus.FAILED, **kw
    )  # type: ignore[arg-type]
    return Envelope.root(payload, project="acme/web", session_id="api_fix_vehicle_listings", producer="test")


async def ask(kafka: KafkaClientConfig, topics: Topics, trigger: Trigger, **kw: object) -> Envelope[ContextInjected]:
    payload = RetrievalRequested(
        agent_name="copilot",
        prompt="Fix the vehicle listings pagination",
        trigger=trigger,
        task_id="api_fix_vehicle_listings",
        **kw,
    )  # type: ignore[arg-type]
    request = Envelope.root(payload, project="acme/web", session_id="api_fix_vehicle_listings", producer="test")
    return await request_injection(kafka, topics, request, 60, client_id="t")


async def test_attempts_become_pre_context_for_retries_fallbacks_and_helpers(
    running_pipeline: Resources, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    assert running_pipeline.store is not None
    memory = MemoryItem(
        id="pagination",
        project="acme/web",
        kind=MemoryKind.PATTERN,
        title="Pagination totals",
        content="Vehicle listings pagination must return the total count as a number.",
        confidence=0.9,
    )
    running_pipeline.store.upsert([memory], [embedder.embed_query(memory.embedding_text())])
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(
            topics.attempt_recorded,
            attempt(
                1,
                files_created=("src/services/vehicleService.ts",),
                files_updated=("src/routes/vehicles.ts",),
                validation_errors=(
                    "Vehicle listings API returns inconsistent price formats (string vs number)",
                    "Pagination total count is null in response",
                ),
                exit_reason="validation_failure",
            ),
        )
    await wait_caught_up(kafka, f"{settings.topic_prefix}.attempts", topics.attempt_recorded)

    retry = (await ask(kafka, topics, Trigger.RETRY)).payload
    lines = retry.context.splitlines()
    assert lines[:3] == [
        "--- RETRY CONTEXT ---",
        "Attempt #2 - Previous validation failures:",
        "- Vehicle listings API returns inconsistent price formats (string vs number)",
    ]
    assert "--- END CONTEXT ---" in lines and "### Pagination totals" in retry.context
    assert retry.item_ids == ("pagination",) and len(retry.context) <= 10_000

    fallback = (
        await ask(kafka, topics, Trigger.FALLBACK, failed_provider="gemini", failure_reason="rate_limit_exceeded")
    ).payload
    assert fallback.context.splitlines()[:2] == [
        "--- PROVIDER SWITCH CONTEXT ---",
        "Previous provider (gemini) failed: rate_limit_exceeded",
    ]
    helper = (await ask(kafka, topics, Trigger.HELPER)).payload
    assert helper.context.startswith("--- HELPER AGENT CONTEXT ---\nAttempt #2 (1 previous retries)")
    plain = (await ask(kafka, topics, Trigger.USER_PROMPT)).payload
    assert "CONTEXT ---" not in plain.context

    counts = running_pipeline.metrics.precontext
    assert [counts.labels(t)._value.get() for t in ("retry", "circuit_breaker", "helper")] == [1, 1, 1]

    # kept on disk: another process (the CLI) reads the same pre-context, with the stack still running
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env["CTXBUS_DATA_DIR"] = str(settings.data_dir)
    cli = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "ctxbus.cli.main",
            "precontext",
            "--task",
            "api_fix_vehicle_listings",
            "--type",
            "retry",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines() == lines[: lines.index("--- END CONTEXT ---") + 1]


def test_the_attempt_store_survives_a_reopen(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "a.sqlite3")
    store.add(attempt(1, validation_errors=("boom",), enable_pre_context=False).payload, "2026-01-01T00:00:00Z")
    store.add(attempt(1, validation_errors=("boom again",)).payload, "2026-01-01T00:01:00Z")  # replaces
    store.close()
    again = AttemptStore(tmp_path / "a.sqlite3")
    rows = again.attempts("api_fix_vehicle_listings")
    assert [r["validation_errors"] for r in rows] == [["boom again"]]
    assert again.override("api_fix_vehicle_listings") is None and again.attempts("other") == []
    again.close()
