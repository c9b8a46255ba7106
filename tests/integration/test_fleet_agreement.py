"""Several members, one truth (issue 26): retrievers and injectors as separate ``ctxbus run`` processes on the
embedded broker, a load of prompts with outcomes, attempts, retries and memory sent through the bus interleaved,
a SIGKILL of a retriever and an injector, the retriever restarted on its own directory, a fresh retriever and
injector joining mid-load. At the end every retriever's conviction, success rate and usage for every item equal
those of a single member run over the same events, and every retry's pre-context lists every attempt recorded
before the retry was sent (``ctxbus.bench.fleet``; ``ctxbus bench fleet`` runs the same and prints the figures).

Correctness only: the load keeps a few requests unanswered at a time, whatever the machine's pace; the only
bounds are those of a stuck run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.bench.fleet import FleetPlan, FleetRun
from ctxbus.bench.stack import load_memories
from ctxbus.ports import Embedder
from ctxbus.settings import KafkaSettings, Settings

pytestmark = pytest.mark.integration

MEMORIES = 120


async def agree(broker: EmbeddedBroker, tmp_path: Path, embedder: Embedder, plan: FleetPlan) -> None:
    kafka = KafkaSettings(
        bootstrap_servers=broker.bootstrap_servers,
        enable_idempotence=False,
        fetch_max_wait_ms=5,
        topic_partitions=plan.partitions,
    )
    config = KafkaClientConfig(kafka, broker.bootstrap_servers, embedded=True)
    template = tmp_path / "template"
    await asyncio.to_thread(load_memories, Settings(data_dir=template), MEMORIES)
    result = await FleetRun(plan, config, tmp_path, template, print).execute(embedder)
    figures = result.figures()
    print(figures)
    # the load was what it should be: retries, outcomes and memory all went through, learning moved items
    assert len(result.sent.requests) == plan.requests and result.sent.retries and result.sent.memories
    assert len(result.members) == plan.retrievers + 1  # the joiner too
    assert result.moved > 0, "no outcome moved any item: the comparison would prove nothing"
    # every retriever learned exactly what a single member learns from the same events
    assert result.disagreements == [], "\n".join(result.disagreements[:20])
    # ... and every retry saw every attempt recorded before it, whichever injector served it
    assert result.missing_attempts == [], "\n".join(result.missing_attempts[:20])
    assert all(c.seconds is not None for c in result.catch_ups), figures["catch_up"]


@pytest.mark.timeout(900)
async def test_members_agree_after_kills_a_restart_and_a_join(
    broker: EmbeddedBroker, tmp_path: Path, embedder: Embedder
) -> None:
    await agree(broker, tmp_path, embedder, FleetPlan(requests=120, window=4))


@pytest.mark.slow
@pytest.mark.timeout(3_600)
async def test_members_agree_over_two_thousand_requests(
    broker: EmbeddedBroker, tmp_path: Path, embedder: Embedder
) -> None:
    await agree(broker, tmp_path, embedder, FleetPlan(requests=2_000, window=6))
