"""Recording an outcome by hand: `ctxbus outcome record` and `Memory.record_outcome`, through the real broker
when there is one, else applied to the real store at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.api import Memory
from ctxbus.components import open_store
from ctxbus.contract.payloads import Outcome, OutcomeRecorded, OutcomeScope
from ctxbus.contract.serde import EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.learning.record import OutcomeError
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.settings import KafkaSettings, Settings

from .kafka_io import read_all

pytestmark = pytest.mark.integration

ITEM = MemoryItem(
    id="reset-revokes",
    project="acme",
    kind=MemoryKind.PATTERN,
    confidence=0.7,
    content="After a password reset, revoke every refresh token of the user and clear the session cache.",
)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "outcome", "record", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(CTXBUS_DATA_DIR=str(settings.data_dir), CTXBUS_TOPIC_PREFIX=settings.topic_prefix, **extra)
    return env


async def test_the_cli_publishes_session_and_task_outcomes_on_the_broker(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics
) -> None:
    env = cli_env(
        settings, CTXBUS_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers, CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false"
    )
    done = cli(env, "--project", "acme", "--session", "s-1", "--outcome", "failed", "--notes", "CI red on main")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["via"] == "bus" and receipt["scope"] == "session" and receipt["session_id"] == "s-1"
    done = cli(env, "--project", "acme", "--task", "T-7", "--outcome", "partial", "--source", "ci-bot")
    assert done.returncode == 0, done.stderr
    events = {
        str(e.event_id): e
        for e in (EventDeserializer()(r.value) for r in await read_all(kafka, topics.outcome_recorded, expect=2))
    }
    session = events[receipt["event_id"]]
    assert isinstance(session.payload, OutcomeRecorded)
    assert (session.project, session.session_id, session.payload.scope) == ("acme", "s-1", OutcomeScope.SESSION)
    assert (session.payload.outcome, session.payload.source, session.payload.notes) == (
        Outcome.FAILED,
        "cli",
        "CI red on main",
    )
    (task,) = [e for e in events.values() if e.payload.scope is OutcomeScope.TASK]
    assert (task.payload.task_id, task.payload.outcome, task.payload.source) == ("T-7", Outcome.PARTIAL, "ci-bot")


def test_the_cli_refuses_bad_input_clearly(settings: Settings) -> None:
    env = cli_env(settings)
    for args, message in (
        (["--project", "acme", "--outcome", "failed"], "one of the arguments --session --task is required"),
        (["--project", "acme", "--session", "s", "--task", "t", "--outcome", "failed"], "not allowed with"),
        (["--project", "acme", "--session", "s", "--outcome", "unknown"], "invalid choice: 'unknown'"),
        (["--project", "  ", "--session", "s", "--outcome", "failed"], "--project must not be blank"),
        (["--project", "acme", "--session", "x" * 501, "--outcome", "failed"], "at most 500"),
        (["--project", "acme", "--session", "s", "--outcome", "failed", "--notes", "n" * 10_001], "at most 10000"),
    ):
        done = cli(env, *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    unreachable = cli_env(settings, CTXBUS_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:9")
    done = cli(unreachable, "--project", "acme", "--session", "s", "--outcome", "failed")
    assert done.returncode == 1 and "cannot publish to the broker at 127.0.0.1:9" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def _no_broker(tmp_path: Path) -> Settings:
    """A data dir with no running stack and no cluster configured."""
    return Settings(data_dir=tmp_path / "local", topic_prefix="local", kafka=KafkaSettings(bootstrap_servers=""))


def test_without_a_broker_the_api_applies_the_outcome_to_its_store(tmp_path: Path, embedder: Embedder) -> None:
    settings = _no_broker(tmp_path)
    with Memory(settings, embedder, open_store(settings, embedder)) as memory:
        memory.add([ITEM])
        # a session the caller names is recorded for learning: its outcome counts for what prime injected
        memory.prime("acme", "Fix the password reset: old sessions stay valid", session_id="s-9")
        done = memory.record_outcome("acme", "failed", session_id="s-9", notes="still valid after reset")
        assert (done.via, done.scope, done.outcome, done.items_counted, done.items_updated) == (
            "local",
            "session",
            "failed",
            1,
            1,
        )
        (item,) = memory.store.get("acme", ["reset-revokes"])
        assert (item.feedback.uses, item.feedback.failures) == (1, 1)
        # an outcome for a session nothing was injected into counts for nothing
        other = memory.record_outcome("acme", "successful", session_id="nobody")
        assert (other.items_counted, other.items_updated) == (0, 0)
        with pytest.raises(OutcomeError, match="exactly one of a session id and a task id"):
            memory.record_outcome("acme", "failed")
        with pytest.raises(OutcomeError, match="unknown outcome 'unknown'"):
            memory.record_outcome("acme", "unknown", session_id="s-9")


async def test_with_a_broker_the_api_publishes_and_its_async_twin_too(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder
) -> None:
    with Memory(settings, embedder, open_store(settings, embedder)) as memory:
        done = await memory.arecord_outcome("acme", "successful", task_id="T-1", notes="merged")
        assert (done.via, done.scope, done.task_id, done.items_counted) == ("bus", "task", "T-1", None)
    (record,) = await read_all(kafka, topics.outcome_recorded, expect=1)
    event = EventDeserializer()(record.value)
    assert str(event.event_id) == done.event_id and event.payload.source == "api"


def test_the_cli_applies_locally_with_the_stack_stopped(tmp_path: Path, embedder: Embedder) -> None:
    settings = _no_broker(tmp_path)
    with Memory(settings, embedder, open_store(settings, embedder)) as memory:
        memory.add([ITEM])
        memory.prime("acme", "Fix the password reset: old sessions stay valid", session_id="s-3")
    env = cli_env(settings)
    env["CTXBUS_TOPIC_PREFIX"] = "local"
    done = cli(env, "--project", "acme", "--session", "s-3", "--outcome", "successful")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert (receipt["via"], receipt["items_counted"], receipt["items_updated"]) == ("local", 1, 1)
    assert "no broker running: applied to the store" in done.stderr
    store = open_store(settings, embedder)
    try:
        (item,) = store.get("acme", ["reset-revokes"])
        assert (item.feedback.uses, item.feedback.successes) == (1, 1)
    finally:
        store.close()
