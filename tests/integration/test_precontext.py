"""Seed 003 through the bus: attempt events are kept (across restarts) and retry, fallback and helper
requests get the pre-context at the start of their injected context."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.cli.agent_cmds import cmd_precontext, register
from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import project_of
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    AttemptRecorded,
    AttemptStatus,
    ContextInjected,
    Outcome,
    OutcomeRecorded,
    OutcomeScope,
    RetrievalRequested,
    Trigger,
)
from ctxbus.contract.serde import HEADER_DLQ_PREFIX
from ctxbus.contract.topics import Topics
from ctxbus.core.precontext import DEFAULT_PROJECT
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.state_groups import member_groups
from ctxbus.wiring import Resources

from .kafka_io import read_all, send_raw, wait_caught_up

pytestmark = pytest.mark.integration


def attempt(n: int, **kw: object) -> Envelope[AttemptRecorded]:
    fields: dict[str, object] = {"provider": "gemini", "status": AttemptStatus.FAILED, **kw}
    payload = AttemptRecorded(task_id="api_fix_vehicle_listings", attempt_number=n, **fields)  # type: ignore[arg-type]
    return Envelope.root(payload, project="acme/web", session_id="api_fix_vehicle_listings", producer="test")


async def ask(
    kafka: KafkaClientConfig, topics: Topics, trigger: Trigger, project: str = "acme/web", **kw: object
) -> Envelope[ContextInjected]:
    payload = RetrievalRequested(
        agent_name="copilot",
        prompt="Fix the vehicle listings pagination",
        trigger=trigger,
        task_id="api_fix_vehicle_listings",
        **kw,
    )  # type: ignore[arg-type]
    request = Envelope.root(payload, project=project, session_id="api_fix_vehicle_listings", producer="test")
    return await request_injection(kafka, topics, request, 60, client_id="t")


def cli_precontext(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env["CTXBUS_DATA_DIR"] = str(settings.data_dir)
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "precontext", "--task", "api_fix_vehicle_listings", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
    await wait_caught_up(kafka, member_groups(settings)["attempts"], topics.attempt_recorded)

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
    cli = await asyncio.to_thread(cli_precontext, settings, "--type", "retry", "--project", "acme/web")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines() == lines[: lines.index("--- END CONTEXT ---") + 1]


async def test_a_project_never_gets_another_projects_attempts(
    running_pipeline: Resources, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    default = attempt(1, validation_errors=("default's validation error",), files_created=("src/default.ts",))
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(topics.attempt_recorded, default.model_copy(update={"project": DEFAULT_PROJECT}))
    await wait_caught_up(kafka, member_groups(settings)["attempts"], topics.attempt_recorded)

    for trigger in (Trigger.RETRY, Trigger.HELPER, Trigger.FALLBACK):
        other = (await ask(kafka, topics, trigger, project="other", failed_provider="gemini")).payload
        assert "CONTEXT ---" not in other.context and "default's validation error" not in other.context, trigger
    own = (await ask(kafka, topics, Trigger.RETRY, project=DEFAULT_PROJECT)).payload
    assert own.context.startswith("--- RETRY CONTEXT ---\nAttempt #2 - Previous validation failures:")

    other_cli = await asyncio.to_thread(cli_precontext, settings, "--type", "retry", "--project", "other")
    assert (other_cli.returncode, other_cli.stdout) == (0, ""), other_cli.stderr
    default_cli = await asyncio.to_thread(cli_precontext, settings, "--type", "retry", "--project", DEFAULT_PROJECT)
    assert default_cli.returncode == 0 and "- default's validation error" in default_cli.stdout


async def test_a_task_outcome_ends_the_tasks_pre_context(
    running_pipeline: Resources, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    async with EventPublisher(kafka, "t") as pub:
        for n in (1, 2):
            await pub.publish(topics.attempt_recorded, attempt(n, validation_errors=(f"error {n}",)))
        await pub.publish(topics.attempt_recorded, attempt(3, status=AttemptStatus.COMPLETED))
    await wait_caught_up(kafka, member_groups(settings)["attempts"], topics.attempt_recorded)
    before = (await ask(kafka, topics, Trigger.RETRY)).payload.context
    assert before.startswith("--- RETRY CONTEXT ---\nAttempt #4 - previous attempt completed\n")

    outcome = OutcomeRecorded(
        scope=OutcomeScope.TASK, task_id="api_fix_vehicle_listings", outcome=Outcome.SUCCESSFUL, source="test"
    )
    other_task = OutcomeRecorded(scope=OutcomeScope.TASK, task_id="another-task", outcome=Outcome.FAILED, source="t")
    session = OutcomeRecorded(outcome=Outcome.SUCCESSFUL, source="test")  # a session's outcome ends no task
    async with EventPublisher(kafka, "t") as pub:
        for payload in (session, other_task):
            await pub.publish(
                topics.outcome_recorded,
                Envelope.root(payload, project="acme/web", session_id="api_fix_vehicle_listings", producer="test"),
            )
        await pub.publish(
            topics.outcome_recorded,
            Envelope.root(outcome, project="elsewhere", session_id="api_fix_vehicle_listings", producer="test"),
        )
    await wait_caught_up(kafka, member_groups(settings)["task-outcomes"], topics.outcome_recorded)
    assert (await ask(kafka, topics, Trigger.RETRY)).payload.context == before  # none of those ends this task

    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(
            topics.outcome_recorded,
            Envelope.root(outcome, project="acme/web", session_id="api_fix_vehicle_listings", producer="test"),
        )
    await send_raw(kafka, topics.outcome_recorded, b"not an event")  # poison: dead-lettered, the loop goes on
    await wait_caught_up(kafka, member_groups(settings)["task-outcomes"], topics.outcome_recorded)
    for trigger in (Trigger.RETRY, Trigger.HELPER, Trigger.FALLBACK):
        after = (await ask(kafka, topics, trigger, failed_provider="gemini")).payload
        assert "CONTEXT ---" not in after.context, trigger
    cli = await asyncio.to_thread(cli_precontext, settings, "--type", "retry", "--project", "acme/web")
    assert (cli.returncode, cli.stdout) == (0, ""), cli.stderr

    letters = await read_all(kafka, topics.dead_letter, expect=2, timeout_s=15)
    groups = {dict(r.headers).get(HEADER_DLQ_PREFIX + "consumer-group") for r in letters}
    assert member_groups(settings)["task-outcomes"].encode() in groups
    assert all(r.value == b"not an event" for r in letters)


def test_the_attempt_store_survives_a_reopen(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "a.sqlite3")
    store.add(
        "acme/web", attempt(1, validation_errors=("boom",), enable_pre_context=False).payload, "2026-01-01T00:00:00Z"
    )
    store.add("acme/web", attempt(1, validation_errors=("boom again",)).payload, "2026-01-01T00:01:00Z")  # replaces
    store.close()
    again = AttemptStore(tmp_path / "a.sqlite3")
    task = again.task("acme/web", "api_fix_vehicle_listings")
    assert [r["validation_errors"] for r in task.attempts] == [["boom again"]]
    assert task.override is None and not task.closed and again.task("acme/web", "other").attempts == []
    again.close()


# --- keyed by (project, task); closed by a task outcome ------------------------------------------


def test_attempts_are_keyed_by_project_and_task(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "a.sqlite3")
    store.add("default", attempt(1, validation_errors=("default's error",)).payload, "2026-01-01T00:00:00Z")
    store.add(
        "other",
        attempt(1, validation_errors=("other's error",), enable_pre_context=False).payload,
        "2026-01-01T00:00:01Z",
    )
    store.add("other", attempt(2, validation_errors=("other's second",)).payload, "2026-01-01T00:00:02Z")
    mine, theirs = store.task("default", "api_fix_vehicle_listings"), store.task("other", "api_fix_vehicle_listings")
    assert [r["validation_errors"] for r in mine.attempts] == [["default's error"]] and mine.override is None
    assert [r["attempt_number"] for r in theirs.attempts] == [1, 2] and theirs.override is False
    assert store.task("nobody", "api_fix_vehicle_listings").attempts == []
    store.close()


def test_a_closed_task_gives_no_attempts_until_a_later_one_reopens_it(tmp_path: Path) -> None:
    store = AttemptStore(tmp_path / "a.sqlite3")
    store.add("acme/web", attempt(1, validation_errors=("a",)).payload, "2026-01-01T00:00:00+00:00")
    store.add("acme/web", attempt(2, validation_errors=("b",)).payload, "2026-01-01T00:00:10+00:00")
    store.add("other", attempt(1, validation_errors=("c",)).payload, "2026-01-01T00:00:10+00:00")
    store.close_task("acme/web", "api_fix_vehicle_listings", "successful", "2026-01-01T00:01:00+00:00")
    closed = store.task("acme/web", "api_fix_vehicle_listings")
    assert closed.closed and closed.attempts == [] and closed.closure is not None
    assert (closed.closure.outcome, closed.closure.state) == ("successful", "completed")
    assert len(store.task("other", "api_fix_vehicle_listings").attempts) == 1  # another project's task is open
    # an attempt recorded after the outcome starts the task afresh; a late, older outcome does not close it again
    store.add("acme/web", attempt(3, validation_errors=("d",)).payload, "2026-01-01T00:02:00+00:00")
    store.close_task("acme/web", "api_fix_vehicle_listings", "failed", "2026-01-01T00:00:30+00:00")
    reopened = store.task("acme/web", "api_fix_vehicle_listings")
    assert not reopened.closed and [r["attempt_number"] for r in reopened.attempts] == [3]
    store.close_task("acme/web", "api_fix_vehicle_listings", "failed", "2026-01-01T00:03:00+00:00")
    abandoned = store.task("acme/web", "api_fix_vehicle_listings")
    assert abandoned.closed and abandoned.closure is not None and abandoned.closure.state == "abandoned"
    store.close()
    # nothing was deleted: the rows are all still on disk
    with sqlite3.connect(tmp_path / "a.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM attempts").fetchone() == (4,)


LEGACY_SCHEMA = """
CREATE TABLE attempts (
    task_id TEXT NOT NULL,
    attempt_number INTEGER NOT NULL,
    record TEXT NOT NULL,
    enable_pre_context INTEGER,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (task_id, attempt_number)
);
"""


def test_a_store_from_before_projects_is_migrated_without_loss(tmp_path: Path) -> None:
    path = tmp_path / "attempts.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(LEGACY_SCHEMA)
        for n, override in ((1, 0), (2, None)):
            record = attempt(n, validation_errors=(f"error {n}",)).payload
            row = {
                "task_id": record.task_id,
                "attempt_number": n,
                "provider": "gemini",
                "status": "failed",
                "validation_errors": [f"error {n}"],
            }
            db.execute(
                "INSERT INTO attempts VALUES (?, ?, ?, ?, ?)",
                (record.task_id, n, json.dumps(row), override, f"2026-01-0{n}T00:00:00+00:00"),
            )
        db.execute("INSERT INTO attempts VALUES ('broken', 1, 'not json', NULL, 'x')")
    store = AttemptStore(path)
    task = store.task(DEFAULT_PROJECT, "api_fix_vehicle_listings")
    assert [r["validation_errors"] for r in task.attempts] == [["error 1"], ["error 2"]] and task.override is False
    assert store.task("acme/web", "api_fix_vehicle_listings").attempts == []
    store.add("acme/web", attempt(1).payload, "2026-02-01T00:00:00+00:00")  # the new key accepts the same task
    store.close()
    AttemptStore(path).close()  # opening a migrated store again changes nothing
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT project, task_id, attempt_number, record FROM attempts ORDER BY 1, 2, 3").fetchall()
    assert [r[:3] for r in rows] == [
        ("acme/web", "api_fix_vehicle_listings", 1),
        (DEFAULT_PROJECT, "api_fix_vehicle_listings", 1),
        (DEFAULT_PROJECT, "api_fix_vehicle_listings", 2),
        (DEFAULT_PROJECT, "broken", 1),
    ]
    assert rows[3][3] == "not json"  # kept as it was, even unreadable


# --- the CLI: missing data is an empty string and exit 0 -------------------------------------------


def precontext_args(**kw: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "task": "api_fix_vehicle_listings",
        "type": "retry",
        "provider": None,
        "reason": None,
        "project": DEFAULT_PROJECT,
    }
    values.update(kw)
    return argparse.Namespace(**values)


def test_register_gives_precontext_the_directorys_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXBUS_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)  # no repository: the directory's path, as the hooks would say
    parser = argparse.ArgumentParser(prog="ctxbus")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["precontext", "--task", "t", "--type", "retry"])
    assert args.handler is cmd_precontext and project_of(args) == str(tmp_path)
    recorded = parser.parse_args(
        ["attempt", "record", "--task", "t", "--attempt", "1", "--provider", "p", "--status", "failed"]
    )
    assert project_of(recorded) == str(tmp_path)
    assert project_of(parser.parse_args(["precontext", "--task", "t", "--type", "retry", "--project", "default"])) == (
        DEFAULT_PROJECT
    )


def test_the_cli_prints_nothing_and_exits_0_when_there_is_nothing_to_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(data))
    assert cmd_precontext(precontext_args()) == 0  # no store at all
    assert capsys.readouterr().out == "" and not (data / "attempts.sqlite3").exists()

    store = AttemptStore(data / "attempts.sqlite3")
    store.add(DEFAULT_PROJECT, attempt(1, validation_errors=("boom",)).payload, "2026-01-01T00:00:00+00:00")
    store.close()
    assert cmd_precontext(precontext_args()) == 0
    assert capsys.readouterr().out.startswith(
        "--- RETRY CONTEXT ---\nAttempt #2 - Previous validation failures:\n- boom"
    )
    for args in (
        precontext_args(task="unknown"),
        precontext_args(project="other"),
        precontext_args(type="helper", project="other"),
    ):
        assert cmd_precontext(args) == 0
        assert capsys.readouterr().out == ""

    store = AttemptStore(data / "attempts.sqlite3")
    store.close_task(DEFAULT_PROJECT, "api_fix_vehicle_listings", "successful", "2026-01-02T00:00:00+00:00")
    store.close()
    for kind in ("retry", "fallback", "helper"):
        assert cmd_precontext(precontext_args(type=kind, provider="gemini")) == 0
        assert capsys.readouterr().out == ""

    (data / "attempts.sqlite3").write_bytes(b"this is not a database" * 100)
    for name in ("attempts.sqlite3-wal", "attempts.sqlite3-shm"):
        (data / name).unlink(missing_ok=True)
    assert cmd_precontext(precontext_args()) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err


def test_the_cli_refuses_a_blank_project() -> None:
    with pytest.raises(CliError, match="--project must not be blank"):
        cmd_precontext(precontext_args(project=" "))
