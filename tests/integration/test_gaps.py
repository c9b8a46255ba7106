"""Context gaps end to end: agent states through the real broker, retriever, injector and recorder
(in-process), with the real embedder; the semantic detector on real embeddings; the CLI handler."""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.errors import CliError
from ctxbus.cli.gap_cmds import cmd_gap, register
from ctxbus.components import open_store
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.agent_state import parse_state
from ctxbus.core.deadlines import RETURN_MARGIN_S
from ctxbus.core.gap_sources import compose
from ctxbus.core.gaps import Gap, GapPolicy, GapReason, detect_gap
from ctxbus.gaps import GapInjectionTimeout, GapInputError, GapStatus, assess, fill_gap
from ctxbus.gaps.result import apply_injection
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.wiring import SERVICES, Resources, run_services

from .kafka_io import read_all

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "agent_state_gap.json"
NOW = datetime(2024, 6, 3, 9, 30, tzinfo=UTC)
PATTERNS = {
    "version": "1.0.0",
    "patterns": [
        {
            "pattern_id": "reset-revokes",
            "domain": "auth",
            "title": "Password reset revokes sessions",
            "description": "After a password reset, revoke every refresh token and clear the cached sessions.",
            "confidence": 0.92,
            "usage_count": 3,
            "success_rate": 0.9,
        },
        {
            "pattern_id": "invoice-rounding",
            "domain": "billing",
            "title": "Round invoice totals once",
            "description": "Round invoice totals to cents only after summing the line items.",
            "confidence": 0.9,
        },
    ],
}


def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SAMPLE.read_text())
    return data


def sample_gap() -> Gap:
    gap = detect_gap(parse_state(sample()), GapPolicy(), now=NOW)
    assert gap is not None
    return gap


@pytest.fixture
async def stack(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[None]:
    """The three services in this loop, over a store holding the patterns above for acme/web."""
    patterns = tmp_path / "learned_patterns.json"
    patterns.write_text(json.dumps(PATTERNS))
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(patterns, project="acme/web").items, embedder, store)
    metrics, stop, ready = Metrics(), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        run_services(
            SERVICES, settings, kafka, metrics, stop, Resources(settings, metrics, embedder, store), on_ready=ready.set
        )
    )
    await asyncio.wait_for(ready.wait(), 60)
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def events(kafka: KafkaClientConfig, topic: str, expect: int) -> list[Any]:
    decode = EventDeserializer()
    return [decode(r.value) for r in await read_all(kafka, topic, expect=expect, timeout_s=10)]


# --- through the pipeline ----------------------------------------------------------------------


@pytest.mark.usefixtures("stack")
async def test_a_clarification_request_gets_the_projects_memory_injected(
    settings: Settings, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics
) -> None:
    state = sample()
    before = copy.deepcopy(state)
    result = await fill_gap(state, settings=settings, embedder=embedder, timeout_s=15)
    assert state == before  # the input is not mutated
    assert result.status is GapStatus.INJECTED and result.gap is not None
    assert result.gap.reason is GapReason.CLARIFICATION_REQUESTED and result.target == "injected_context"
    assert result.item_ids == ("reset-revokes",)
    injected = result.state["injected_context"]
    assert "### Password reset revokes sessions" in injected["context"]
    assert (
        injected["correlation_id"] == str(result.correlation_id) and injected["gap_reason"] == "clarification_requested"
    )
    (entry,) = result.state["injection_log"]
    assert entry["item_ids"] == ["reset-revokes"] and entry["chars"] == len(injected["context"])
    assert (
        entry["correlation_id"] == str(result.correlation_id) and entry["confidence"] == result.log_entry["confidence"]
    )
    assert {k: v for k, v in result.state.items() if k not in ("injected_context", "injection_log")} == before

    # all four sources, each under its label, within the one budget
    context = injected["context"]
    assert [line for line in context.splitlines() if line.startswith("# ")] == [
        "# Context from memory",
        "# Context from the agent state",
        "# Context from the sprint",
        "# Context from the architecture",
    ]
    assert "- decision (architect): Sessions are cached in Redis for 15 minutes" in context
    assert "- related stories: STORY-139 Session cache TTL" in context and "- adrs: ADR-007 token lifetimes" in context
    assert injected["source_counts"] == {"memory": 1, "state": 2, "sprint": 1, "architecture": 1} == result.sources
    assert {s["origin"] for s in injected["sources"]} >= {"decisions[0]", "sprint.related_stories[0]"}
    assert len(context) <= settings.injection.max_chars and embedder.count_tokens(context) <= 2_000
    # the gap's identity, the time it took and the size, in the result and in the log
    assert result.gap.gap_id == entry["gap_id"] == injected["gap_id"] and uuid.UUID(result.gap.gap_id)
    assert entry["detected_at"] == result.gap.detected_at.isoformat()
    assert 0 < result.duration_ms == entry["duration_ms"]
    assert result.context_bytes == entry["bytes"] == len(context.encode("utf-8")) and result.context_chars == len(
        context
    )
    assert (
        result.to_dict()["duration_ms"] == result.duration_ms and result.to_dict()["gap"]["gap_id"] == entry["gap_id"]
    )

    (request,) = await events(kafka, topics.retrieval_requested, 1)
    assert isinstance(request.payload, RetrievalRequested) and request.correlation_id == result.correlation_id
    assert request.project == "acme/web" and request.session_id == "sprint-14-dev-3"
    p = request.payload
    assert p.trigger is Trigger.GAP and p.injection_target == "injected_context" and p.agent_name == "dev"
    assert p.domain == "auth" and p.mentioned_files == ("src/auth/reset.py", "src/auth/session_cache.py")
    assert p.prompt.startswith("Should a password reset revoke")
    # the pipeline knows when this call stops waiting (timeout_s), less the answer's way back
    assert p.deadline == request.emitted_at + timedelta(seconds=15 - RETURN_MARGIN_S)
    # memory was asked for what the state's own context left of the budget
    assert p.max_chars < settings.injection.max_chars and p.max_tokens < settings.injection.max_tokens


@pytest.mark.usefixtures("stack")
async def test_a_project_without_memories_still_gets_the_states_own_context(
    settings: Settings, embedder: Embedder
) -> None:
    state = {
        "project": "empty/project",
        "session_id": "s-own",
        "current_agent": "dev",
        "task": "Decide the session lifetime after a password reset",
        "messages": [
            {
                "role": "agent",
                "agent": "architect",
                "content": "Password resets must end every session on every device.",
            },
            {"role": "agent", "agent": "dev", "content": "I'm not sure what lifetime the new session should get."},
        ],
        "decisions": [{"agent": "po", "summary": "New sessions after a reset last 15 minutes"}, "Invoices round once"],
    }
    before = copy.deepcopy(state)
    result = await fill_gap(state, settings=settings, embedder=embedder, timeout_s=15)
    assert state == before
    assert result.status is GapStatus.INJECTED and result.item_ids == ()
    assert result.gap is not None and [i.signal for i in result.gap.indicators] == ["clarification_phrase"]
    assert "from the state only (memory: no_memories_in_project)" in result.why
    context = result.state["injected_context"]["context"]
    assert context.startswith("# Context from the agent state\n") and "Invoices" not in context
    assert "- decision (po): New sessions after a reset last 15 minutes" in context
    assert "- message (architect): Password resets must end every session on every device." in context
    (entry,) = result.state["injection_log"]
    assert entry["memory_empty_reason"] == "no_memories_in_project" and entry["empty_reason"] is None
    assert entry["sources"] == {"memory": 0, "state": 2, "sprint": 0, "architecture": 0} == result.sources


@pytest.mark.usefixtures("stack")
async def test_before_a_handoff_the_context_goes_into_the_handoff_context(
    settings: Settings, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics
) -> None:
    state = {
        "project": "acme/web",
        "session_id": "s-handoff",
        "current_agent": "dev",
        "task": "Verify the login fix after password reset",
        "handoff": {"pending": True, "from_agent": "dev", "to_agent": "qa"},
        "handoff_context": {"recent_messages": ["fix merged"], "required_context": ["session behaviour"]},
        "agent_output": {"agent": "dev", "missing_context": ["what happens to sessions after a password reset"]},
        "injection_log": [{"at": "earlier", "gap_reason": "explicit_flag"}],
    }
    result = await fill_gap(state, settings=settings, embedder=embedder, timeout_s=15)
    assert result.status is GapStatus.INJECTED and result.target == "handoff_context"
    handoff = result.state["handoff_context"]
    assert handoff["recent_messages"] == ["fix merged"] and handoff["required_context"] == ["session behaviour"]
    assert "Password reset revokes sessions" in handoff["context"] and "injected_context" not in result.state
    assert len(result.state["injection_log"]) == 2 and result.state["injection_log"][-1]["target"] == "handoff_context"
    injected = [e for e in await events(kafka, topics.context_injected, 1) if e.correlation_id == result.correlation_id]
    assert isinstance(injected[0].payload, ContextInjected)
    assert injected[0].payload.injection_target == "handoff_context" and injected[0].payload.agent_name == "qa"


@pytest.mark.usefixtures("stack")
async def test_a_gap_with_nothing_relevant_logs_an_empty_injection(settings: Settings, embedder: Embedder) -> None:
    state = {
        "project": "empty/project",
        "session_id": "s",
        "current_agent": "dev",
        "agent_output": {"missing_context": ["the deployment calendar"]},
    }
    result = await fill_gap(state, settings=settings, embedder=embedder, timeout_s=15)
    assert result.status is GapStatus.EMPTY and "no_memories_in_project" in result.why
    assert "injected_context" not in result.state
    assert result.state["injection_log"][0]["empty_reason"] == "no_memories_in_project"


@pytest.mark.usefixtures("stack")
async def test_a_state_without_a_gap_comes_back_unchanged(
    settings: Settings, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics
) -> None:
    state = sample()
    state["messages"] = state["messages"][:3]  # no clarification request
    state["health_metrics"]["agent_cycle_times"]["dev"] = 200.0  # within 2x its baseline
    result = await fill_gap(state, settings=settings, embedder=embedder, timeout_s=15)
    assert result.status is GapStatus.NO_GAP and result.why == "no gap indicators in the state"
    assert result.state == state and result.state is not state and result.duration_ms > 0
    assert await events(kafka, topics.retrieval_requested, 0) == []


async def test_no_answer_in_time_is_a_timeout_and_no_change(
    settings: Settings, embedder: Embedder, topics: Topics
) -> None:
    state = sample()
    with pytest.raises(GapInjectionTimeout, match=r"no injection within 0\.5 s for the clarification_requested gap"):
        await fill_gap(state, settings=settings, embedder=embedder, timeout_s=0.5)  # no services run
    assert state == sample()


async def test_a_gap_without_a_session_cannot_be_requested(settings: Settings, embedder: Embedder) -> None:
    state = {k: v for k, v in sample().items() if k not in ("project", "session_id")}
    with pytest.raises(GapInputError, match="no project and session_id") as err:
        await fill_gap(state, settings=settings, embedder=embedder)
    assert err.value.missing == ("project", "session_id")


# --- semantic circular logic on real embeddings ------------------------------------------------


def agent_says(*texts: str) -> dict[str, Any]:
    return {"current_agent": "dev", "messages": [{"role": "agent", "content": t} for t in texts]}


def test_an_agent_going_round_in_circles_is_seen_by_meaning(embedder: Embedder) -> None:
    looping = agent_says(
        "I'll revoke all refresh tokens on reset.",
        "We should revoke the refresh tokens when the password is reset.",
        "Reverting: maybe we should keep refresh tokens after reset.",
        "Let me revoke refresh tokens on password reset instead.",
    )
    gap = assess(parse_state(looping), GapPolicy(), embedder, now=NOW).gap
    assert gap is not None and gap.reason is GapReason.CIRCULAR_LOGIC
    assert [i.signal for i in gap.indicators] == ["semantic_repetition"]
    steady = agent_says(
        "Added the reset endpoint.",
        "Wrote the migration for the tokens table.",
        "Updated the docs for the auth API.",
        "Fixed a flaky test in the session cache.",
    )
    assessment = assess(parse_state(steady), GapPolicy(), embedder, now=NOW)
    assert assessment.gap is None and assessment.indicators == ()


# --- the CLI handler ---------------------------------------------------------------------------


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The handler configures structlog onto the (captured) stderr; put the configuration back."""
    configured, config = structlog.is_configured(), structlog.get_config()
    yield
    structlog.reset_defaults()
    if configured:
        structlog.configure(**config)


def gap_args(state: Path, **kw: Any) -> argparse.Namespace:
    values: dict[str, Any] = {"state": state, "project": None, "timeout": 10.0, "detect_only": False, "output": None}
    values.update(kw)
    return argparse.Namespace(**values)


def test_register_adds_the_gap_command() -> None:
    parser = argparse.ArgumentParser(prog="ctxbus")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["gap", "--state", "s.json", "--detect-only", "--timeout", "3", "--output", "o.json"])
    assert args.handler is cmd_gap and args.state == Path("s.json") and args.output == Path("o.json")
    assert args.detect_only and args.timeout == 3.0 and args.project is None


@pytest.mark.usefixtures("restore_logging")
def test_without_a_broker_the_cli_fills_the_gap_from_the_states_own_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25 (seed 000: the memory store is optional): no broker used to be exit 1 and nothing injected."""
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CTXBUS_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "state.json"
    assert cmd_gap(gap_args(SAMPLE, output=out)) == 0
    state = json.loads(out.read_text())
    written = state["injected_context"]
    assert written["context"].startswith("# Context from the agent state\n") and written["item_ids"] == []
    assert written["correlation_id"] is None and written["source_counts"]["memory"] == 0
    assert sum(written["source_counts"].values()) >= 1
    (entry,) = state["injection_log"]
    assert entry["memory_empty_reason"] == "no_broker" and entry["empty_reason"] is None
    assert "from the state only (memory: no_broker)" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_logging")
def test_the_cli_detects_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_gap(gap_args(SAMPLE, detect_only=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gap"]["reason"] == "clarification_requested" and out["gap"]["target"] == "injected_context"
    assert out["gap"]["mentioned_files"] == ["src/auth/reset.py", "src/auth/session_cache.py"]
    assert [i["signal"] for i in out["indicators"]] == ["clarification_flag", "cycle_time"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ("[1, 2]", "the agent state must be a JSON object, not list"),
        ('{"messages": [{"clarification_needed": "maybe"}]}', "messages[0].clarification_needed"),
        ('{"health_metrics": {"agent_cycle_times": {"dev": "slow"}}}', "health_metrics.agent_cycle_times.dev"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_the_cli_names_what_is_wrong_with_a_state_file(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "state.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(CliError) as err:
        cmd_gap(gap_args(path, detect_only=True))
    assert message in str(err.value) and str(path) in str(err.value) and err.value.code == 2


def test_the_cli_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="--timeout must be positive"):
        cmd_gap(gap_args(SAMPLE, timeout=0.0))
    with pytest.raises(CliError, match="--project must not be blank"):
        cmd_gap(gap_args(SAMPLE, project=" "))
    with pytest.raises(CliError, match="not a file"):
        cmd_gap(gap_args(tmp_path))


@pytest.mark.usefixtures("stack", "restore_logging")
async def test_the_cli_writes_the_updated_state(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CTXBUS_TOPIC_PREFIX", settings.topic_prefix)
    monkeypatch.setenv("CTXBUS_KAFKA_BOOTSTRAP_SERVERS", settings.kafka.bootstrap_servers)
    monkeypatch.setenv("CTXBUS_KAFKA_ENABLE_IDEMPOTENCE", "false")
    monkeypatch.setenv("CTXBUS_KAFKA_FETCH_MAX_WAIT_MS", "5")
    state = {k: v for k, v in sample().items() if k != "project"}
    source, output = tmp_path / "state.json", tmp_path / "out.json"
    source.write_text(json.dumps(state))
    code = await asyncio.to_thread(cmd_gap, gap_args(source, project="acme/web", output=output, timeout=15.0))
    assert code == 0
    written = json.loads(output.read_text())
    assert "Password reset revokes sessions" in written["injected_context"]["context"]
    assert json.loads(source.read_text()) == state  # the input file is untouched
    assert capsys.readouterr().out == ""  # the document went to the file, logs to stderr


# --- the writer ----------------------------------------------------------------------------------


def test_a_target_holding_something_else_is_replaced_and_says_so() -> None:
    raw = {**sample(), "injected_context": "old notes", "injection_log": "not a list"}
    gap = sample_gap()
    payload = ContextInjected.model_validate(
        {
            "context_source": "rag_query",
            "pattern_count": 1,
            "context_size_bytes": 3,
            "retrieval_duration_ms": 1,
            "agent_name": "dev",
            "trigger": "gap",
            "context": "new",
            "context_chars": 3,
            "token_estimate": 1,
            "item_ids": ["x"],
            "injection_target": gap.target,
        }
    )
    event = Envelope.root(payload, project="acme/web", session_id="s", producer="test", correlation_id=uuid.uuid4())
    composed = compose("new", (), max_chars=100, max_tokens=100, count_tokens=len, memory_items=1)
    state, entry = apply_injection(raw, gap, event, composed, datetime(2024, 6, 3, tzinfo=UTC), 12.5)
    assert state["injected_context"]["context"] == "# Context from memory\nnew" and entry["replaced"] is True
    assert (entry["duration_ms"], entry["bytes"], entry["gap_id"]) == (12.5, len(composed.text), gap.gap_id)
    assert state["injection_log"] == [entry] and entry["at"] == "2024-06-03T00:00:00+00:00"
    assert raw["injected_context"] == "old notes"


def test_the_context_goes_where_the_injection_says() -> None:
    """Issue 25: ``injection_target`` travelled on the injected event and nothing read it; the writer does."""
    gap = sample_gap()
    payload = ContextInjected.model_validate(
        {
            "context_source": "rag_query",
            "pattern_count": 1,
            "context_size_bytes": 3,
            "retrieval_duration_ms": 1,
            "agent_name": "dev",
            "trigger": "gap",
            "context": "new",
            "context_chars": 3,
            "token_estimate": 1,
            "item_ids": ["x"],
            "injection_target": "handoff_context",
        }
    )
    event = Envelope.root(payload, project="acme/web", session_id="s", producer="test")
    composed = compose("new", (), max_chars=100, max_tokens=100, count_tokens=len, memory_items=1)
    state, entry = apply_injection(sample(), gap, event, composed, datetime(2024, 6, 3, tzinfo=UTC), 1.0)
    assert gap.target == "injected_context" and "injected_context" not in state
    assert state["handoff_context"]["context"] == "# Context from memory\nnew" and entry["target"] == "handoff_context"
