"""``ctxbus replay`` on the real embedded broker: real requests through the real pipeline joined back,
the services' consumer groups untouched, poison skipped and counted, time windows and offsets, the
command's errors, worker processes agreeing with the in-process read, and a backtest comparing two
profiles with the real embedder and a real Qdrant Edge store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.bench.replay import publish
from ctxbus.bench.replay_events import synthetic_events
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, Outcome, OutcomeRecorded, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.replay.backtest import BacktestSettings, backtest, candidates, historical_requests, pipelines
from ctxbus.replay.engine import ReplayRun, replay
from ctxbus.replay.options import OffsetBound, Selection, to_ms
from ctxbus.settings import Settings
from ctxbus.wiring import Resources

from .kafka_io import committed, send_raw, wait_caught_up

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
MEMORIES = [
    ("reset-tokens", MemoryKind.PATTERN, "After a password reset, revoke every refresh token before the next login."),
    ("login-code", MemoryKind.CODE_REF, "src/auth/login.py: the password reset and login handlers live here."),
    ("reset-tests", MemoryKind.TEST_REF, "tests/auth/test_reset.py covers password reset and login after it."),
    ("auth-decision", MemoryKind.DECISION, "We decided password resets invalidate all sessions (ADR 12, login)."),
    ("auth-convention", MemoryKind.CONVENTION, "Login and password reset errors return 401 with a generic message."),
]


def memory(item_id: str, kind: MemoryKind, content: str) -> MemoryItem:
    return MemoryItem(
        id=item_id,
        project=PROJECT,
        kind=kind,
        title=item_id.replace("-", " "),
        content=content,
        domains=("auth",),
        confidence=0.9,
        importance=0.8,
    )


def request(prompt: str, session: str, **kw: object) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="claude-code", prompt=prompt, trigger=Trigger.USER_PROMPT, **kw)  # type: ignore[arg-type]
    return Envelope.root(payload, project=PROJECT, session_id=session, producer="test")


def session_outcome(session: str, outcome: Outcome) -> Envelope[OutcomeRecorded]:
    return Envelope.root(
        OutcomeRecorded(outcome=outcome, source="hook.SessionEnd"), project=PROJECT, session_id=session, producer="test"
    )


GROUPS = {"retriever": "retrieval_requested", "injector": "retrieval_completed", "recorder": "context_injected"}


async def group_offsets(kafka: KafkaClientConfig, settings: Settings, topics: Topics) -> dict[str, dict[int, int]]:
    return {
        name: await committed(kafka, f"{settings.topic_prefix}.{name}", getattr(topics, attr))
        for name, attr in GROUPS.items()
    }


async def list_groups(kafka: KafkaClientConfig) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    await admin.start()
    try:
        return {g[0] for g in await admin.list_consumer_groups()}
    finally:
        await admin.close()


@pytest.fixture
async def history(
    running_pipeline: Resources, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> list[Envelope[ContextInjected]]:
    """Four real requests through the real pipeline (two sessions, one ends well, one badly), an unknown
    profile and a foreign record (both dead-lettered by the retriever); the services have caught up."""
    assert running_pipeline.store is not None
    ingest([memory(*m) for m in MEMORIES], embedder, running_pipeline.store)
    answers = []
    for prompt, session in (
        ("Fix login after password reset", "good"),
        ("Password reset leaves old sessions logged in", "good"),
        ("Login fails after a password reset", "bad"),
        ("Why does login return 401 after reset", "bad"),
    ):
        answers.append(await request_injection(kafka, topics, request(prompt, session), 60, client_id="test"))
    async with EventPublisher(kafka, "test") as pub:
        await pub.publish(topics.outcome_recorded, session_outcome("good", Outcome.SUCCESSFUL))
        await pub.publish(topics.outcome_recorded, session_outcome("bad", Outcome.FAILED))
        await pub.publish(topics.retrieval_requested, request("Reset password", "odd", agent_role="wizard"))
    await send_raw(kafka, topics.retrieval_requested, b"hello, I am not an event")
    await wait_caught_up(kafka, f"{settings.topic_prefix}.retriever", topics.retrieval_requested)
    await wait_caught_up(kafka, f"{settings.topic_prefix}.injector", topics.retrieval_completed)
    await wait_caught_up(kafka, f"{settings.topic_prefix}.recorder", topics.context_injected)
    return answers


async def test_replay_joins_the_pipelines_chains_and_leaves_the_services_groups_alone(
    history: list[Envelope[ContextInjected]], kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    before = await group_offsets(kafka, settings, topics)
    groups_before = await list_groups(kafka)
    run = await replay(kafka, topics, topics.event_topics(), Selection(), workers=0)
    report = run.report()
    assert await group_offsets(kafka, settings, topics) == before  # no commit moved
    assert await list_groups(kafka) == groups_before  # and no group was joined or created
    assert all(sum(offsets.values()) > 0 for offsets in before.values())

    # 4 answered requests + the unknown profile's request; 2 outcomes; the foreign record skipped
    assert report.chains["total"] == 5 and report.chains["complete"] == 4
    assert report.chains["injected"] + report.chains["empty"] == 4
    assert report.chains["dead_lettered"] == 1
    assert {c.key: c.count for c in report.skipped} == {"bad_framing": 1}
    assert report.latency_ms["end_to_end"].count == 4
    assert report.latency_ms["request_to_completed"].count == 4
    e2e = report.latency_ms["end_to_end"]
    assert e2e.min is not None and e2e.max is not None and 0 < e2e.min <= e2e.max < 60_000
    assert report.outcomes["successful"] == 2 and report.outcomes["failed"] == 2
    assert report.chains["with_outcome"] == 4
    profiles = {r.key: r for r in report.success_by["profile"]}
    assert profiles["implementer"].successful == 2 and profiles["implementer"].failed == 2
    assert profiles["implementer"].success_rate == 0.5

    # what the report says matches what the injections said, chain by chain
    by_corr = {c.correlation_id: c for c in run.join.chains}
    for injected in history:
        chain = by_corr[str(injected.correlation_id)]
        assert chain.injected is not None and chain.injected.item_ids == injected.payload.item_ids
        assert chain.injected.token_estimate == injected.payload.token_estimate
        assert chain.profile == "implementer" and chain.fingerprint is not None
    injected_ids = [i for a in history for i in a.payload.item_ids]
    most = {r.item_id: r.injected for r in report.items_most}
    top = max(set(injected_ids), key=injected_ids.count)
    assert most[top] == injected_ids.count(top)

    # the two dead letters: the foreign bytes (undecodable) and the unknown profile (rejected, linked)
    causes = {c.key: c.count for c in report.dead_letters_by["by_reason"]}
    assert causes == {"undecodable": 1, "rejected": 1}
    (dead,) = [c for c in run.join.chains if c.dead_letter is not None]
    assert dead.dead_letter is not None and "wizard" in dead.dead_letter.error_message
    assert {c.key: c.count for c in report.dead_letters_by["by_consumer_group"]} == {
        f"{settings.topic_prefix}.retriever": 2
    }


async def test_a_time_window_and_offset_bounds(kafka: KafkaClientConfig, topics: Topics) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    records, _ = synthetic_events(topics, 600, now=now, span_s=7_200, seed=9)
    await publish(kafka, records)
    since = now - timedelta(hours=1)
    inside = sum(1 for r in records if r.timestamp_ms >= to_ms(since))
    assert 0 < inside < len(records)

    run = await replay(kafka, topics, topics.event_topics(), Selection(since_ms=to_ms(since)), since=since, workers=0)
    report = run.report()
    assert report.records == inside
    assert run.source.out_of_window == len(records) - inside
    requested = [c.requested for c in run.join.chains if c.requested is not None]
    assert requested and min(r.emitted_us for r in requested) >= to_ms(since) * 1000

    month_ago = Selection(since_ms=to_ms(now - timedelta(days=30)), until_ms=to_ms(now - timedelta(days=29)))
    nothing = await replay(kafka, topics, topics.event_topics(), month_ago)
    assert nothing.report().empty

    bounded = await replay(
        kafka,
        topics,
        [topics.retrieval_requested],
        Selection(from_offsets=OffsetBound(by_partition={0: 2}), to_offsets=OffsetBound(default=6)),
        workers=0,
    )
    ranges = {(t, p): (s, e) for t, p, s, e in bounded.source.partitions}
    assert ranges[(topics.retrieval_requested, 0)] == (2, 6)
    assert ranges[(topics.retrieval_requested, 1)] == (0, 6)
    assert bounded.stats.records == sum(e - s for s, e in ranges.values()) == 16


def _without_timings(run: ReplayRun) -> dict[str, object]:
    data = run.report().to_dict()
    for key in ("read_seconds", "events_per_second", "workers"):
        data["source"].pop(key)
    return data


async def test_worker_processes_report_what_the_in_process_read_reports(
    kafka: KafkaClientConfig, topics: Topics
) -> None:
    records, expected = synthetic_events(topics, 2_000, seed=21)
    await publish(kafka, records)  # batched: the embedded broker's last batches hold many records
    alone = await replay(kafka, topics, topics.event_topics(), Selection(), workers=0)
    shared = await replay(kafka, topics, topics.event_topics(), Selection(), workers=2)
    assert shared.source.workers == 2 and alone.source.workers == 0
    assert alone.stats.records == expected.events  # every record up to the true end, none lost
    assert _without_timings(alone) == _without_timings(shared)


def ctxbus(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_DATA_DIR=str(settings.data_dir),
        CTXBUS_TOPIC_PREFIX=settings.topic_prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=settings.kafka.bootstrap_servers,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_LOG_LEVEL="WARNING",
    )
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "replay", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_the_command_on_an_empty_range_an_unknown_topic_and_a_real_one(
    kafka: KafkaClientConfig, topics: Topics, settings: Settings, tmp_path: Path
) -> None:
    empty = await asyncio.to_thread(ctxbus, settings, "--since", "2020-01-01", "--until", "2020-01-02")
    assert empty.returncode == 0, empty.stderr
    assert "no events between 2020-01-01" in empty.stderr
    assert "No events in this range" in empty.stdout

    unknown = await asyncio.to_thread(ctxbus, settings, "--topic", "injected,nope")
    assert unknown.returncode == 2
    assert "unknown topic 'nope'" in unknown.stderr and topics.context_injected in unknown.stderr

    async with EventPublisher(kafka, "test") as pub:
        for i in range(3):
            await pub.publish(topics.retrieval_requested, request(f"Fix login {i}", "cli"))
    done = await asyncio.to_thread(
        ctxbus, settings, "--topic", "requested", "--format", "csv", "--chart", str(tmp_path / "c.png")
    )
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()
    assert len(rows) == 4 and rows[0].startswith("correlation_id,") and all(",not_completed," in r for r in rows[1:])
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


async def test_a_backtest_compares_two_profiles_with_the_real_handlers(
    history: list[Envelope[ContextInjected]],
    running_pipeline: Resources,
    kafka: KafkaClientConfig,
    topics: Topics,
    settings: Settings,
) -> None:
    assert running_pipeline.embedder is not None and running_pipeline.store is not None
    run = await replay(kafka, topics, topics.event_topics(), Selection(), workers=0)
    kinds = {m[0]: m[1] for m in MEMORIES}
    injected_kinds = {kinds[i] for a in history for i in a.payload.item_ids}
    assert MemoryKind.CODE_REF in injected_kinds or MemoryKind.TEST_REF in injected_kinds

    async def run_with(chosen: BacktestSettings) -> list:  # type: ignore[type-arg]
        picked, left_out = candidates(run.join.chains, chosen)
        requests = await historical_requests(kafka, topics, Selection(), {c.correlation_id for c in picked})
        base, new = pipelines(
            chosen,
            embedder=running_pipeline.embedder,  # type: ignore[arg-type]
            store=running_pipeline.store,  # type: ignore[arg-type]
            topics=topics,
            injection=settings.injection,
        )
        result = await backtest(picked, requests, chosen, base, new, left_out=left_out)
        assert result.summary.left_out == {"no_injection_to_compare": 1}  # the dead-lettered request
        assert not result.summary.failed
        return result.comparisons

    same = await run_with(BacktestSettings(profile="implementer"))
    assert len(same) == 4 and all(c.unchanged and c.jaccard == 1.0 for c in same)  # the history, reproduced

    planner = await run_with(BacktestSettings(profile="planner"))
    assert len(planner) == 4
    historical = {str(a.correlation_id): a.payload.item_ids for a in history}
    for c in planner:
        assert c.before.item_ids == historical[c.correlation_id] and c.before.profile == "implementer"
        assert c.after.profile == "planner"
        # the planner excludes code and test references (seed 004 §3.3): they are dropped, never added
        assert not any(kinds[i] in (MemoryKind.CODE_REF, MemoryKind.TEST_REF) for i in c.after.item_ids)
        assert set(c.dropped) >= {
            i for i in c.before.item_ids if kinds[i] in (MemoryKind.CODE_REF, MemoryKind.TEST_REF)
        }
    assert any(c.jaccard < 1.0 for c in planner)


async def test_a_backtest_while_the_store_is_owned_elsewhere_says_so(
    history: list[Envelope[ContextInjected]], settings: Settings
) -> None:
    busy = await asyncio.to_thread(ctxbus, settings, "--backtest", "--profile", "planner")
    assert busy.returncode == 1
    assert "store" in busy.stderr and "in use by another process" in busy.stderr
    assert "Traceback" not in busy.stderr


async def test_one_chain_is_opened_by_its_correlation_id(
    history: list[Envelope[ContextInjected]], settings: Settings
) -> None:
    """Issue 12: `ctxbus replay --correlation-id ID` prints what the dashboard's inspector shows."""
    injected = next(i for i in history if i.payload.item_ids)
    cid = str(injected.correlation_id)
    table = await asyncio.to_thread(ctxbus, settings, "--correlation-id", cid)
    assert table.returncode == 0, table.stderr
    assert f"chain {cid}" in table.stdout and "ranked items" in table.stdout
    assert injected.payload.item_ids[0] in table.stdout and "injected context" in table.stdout
    as_json = await asyncio.to_thread(ctxbus, settings, "--correlation-id", cid, "--format", "json")
    doc = json.loads(as_json.stdout)
    assert doc["missing"] == [] and doc["injection"]["item_ids"] == list(injected.payload.item_ids)
    ranked = [i["id"] for i in doc["retrieval"]["items"] if i["injected"]]
    assert set(ranked) == set(injected.payload.item_ids)
    assert doc["retrieval"]["request"]["prompt"]["text"]
    missing = await asyncio.to_thread(ctxbus, settings, "--correlation-id", str(uuid.uuid4()))
    assert missing.returncode == 1 and "no events of chain" in missing.stderr
