"""``ctxbus attempt record`` and ``ctxbus precontext``: seed 003's pre-context for orchestrators in any language.

Attempts are keyed by (project, task); both commands take ``--project`` (default: the current directory's
project, as the hooks derive it).
``precontext`` prints an empty string and exits 0 whenever there is nothing to say: no attempt store,
an unreadable one, an unknown task, a task an outcome ended, or pre-context switched off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from typing import Any

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.components import token_counter
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import AttemptRecorded, AttemptStatus
from ctxbus.contract.topics import Topics
from ctxbus.core.precontext import PreContextType, build_precontext
from ctxbus.injector.attempts import policy_from
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings


def register(sub: Any) -> None:
    attempt = sub.add_parser("attempt", help="record an agent's attempt at a task (published as an event)")
    asub = attempt.add_subparsers(dest="attempt_command", required=True)
    rec = asub.add_parser("record", help="publish one attempt record")
    rec.add_argument("--task", required=True)
    rec.add_argument("--attempt", type=int, required=True, help="attempt number, from 1")
    rec.add_argument("--provider", required=True)
    rec.add_argument("--status", choices=[s.value for s in AttemptStatus], required=True)
    rec.add_argument("--created", action="append", default=[], help="a file the attempt created (repeatable)")
    rec.add_argument("--updated", action="append", default=[], help="a file the attempt modified (repeatable)")
    rec.add_argument("--error", action="append", default=[], help="a validation error (repeatable, in order)")
    rec.add_argument("--exit-reason", help="circuit_breaker | validation_failure | execution_error | ...")
    add_project_option(rec, "the project the task belongs to")
    switch = rec.add_mutually_exclusive_group()
    switch.add_argument("--pre-context", dest="pre_context", action="store_true", default=None)
    switch.add_argument("--no-pre-context", dest="pre_context", action="store_false")
    rec.set_defaults(handler=cmd_attempt_record)
    pre = sub.add_parser("precontext", help="print the pre-context for a task's next provider, retry or helper")
    pre.add_argument("--task", required=True)
    pre.add_argument("--type", required=True, choices=["retry", "fallback", "circuit_breaker", "helper"])
    pre.add_argument("--provider", help="the provider that just failed (fallback)")
    pre.add_argument("--reason", help="why it failed (fallback)")
    add_project_option(pre, "the project the task belongs to")
    pre.set_defaults(handler=cmd_precontext)


def cmd_attempt_record(args: argparse.Namespace) -> int:
    settings = Settings()
    project = project_of(args)
    try:
        payload = AttemptRecorded(
            task_id=args.task,
            attempt_number=args.attempt,
            provider=args.provider,
            status=AttemptStatus(args.status),
            files_created=tuple(args.created),
            files_updated=tuple(args.updated),
            validation_errors=tuple(args.error),
            exit_reason=args.exit_reason,
            enable_pre_context=args.pre_context,
        )
        event = Envelope.root(payload, project=project, session_id=args.task, producer="cli")
    except ValueError as exc:
        raise CliError(f"invalid attempt: {exc}") from exc
    try:
        config = kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc

    async def publish() -> None:
        topics = Topics(settings.topic_prefix)
        async with EventPublisher(config, "cli", schemas_topic=topics.schemas) as publisher:
            await publisher.publish(topics.attempt_recorded, event)

    asyncio.run(publish())
    print(
        json.dumps(
            {"published": str(event.event_id), "project": project, "task_id": args.task, "attempt": args.attempt}
        )
    )
    return 0


def _nothing(why: str) -> int:
    """No pre-context: an empty string on stdout (seed 003), the reason on stderr, exit 0."""
    print(f"(no pre-context: {why})", file=sys.stderr)
    return 0


def cmd_precontext(args: argparse.Namespace) -> int:
    settings = Settings()
    project = project_of(args)
    kind = PreContextType.CIRCUIT_BREAKER if args.type == "fallback" else PreContextType(args.type)
    where = f"task {args.task!r} in project {project!r}"
    if not settings.attempts_db.exists():
        return _nothing(f"no attempts recorded yet ({settings.attempts_db} does not exist)")
    try:
        store = AttemptStore(settings.attempts_db)
        try:
            task = store.task(project, args.task)
        finally:
            store.close()
    except sqlite3.Error as exc:
        return _nothing(f"the attempt store {settings.attempts_db} cannot be read: {exc}")
    if task.closure is not None:
        return _nothing(f"{where} ended ({task.closure.state}: outcome {task.closure.outcome})")
    if not task.attempts:
        return _nothing(f"no attempts recorded for {where}")
    text = build_precontext(
        kind,
        task.attempts,
        policy_from(settings.precontext),
        enabled_for_task=task.override,
        provider=args.provider,
        reason=args.reason,
        count_tokens=token_counter(settings),
    )
    print(text, end="")
    return 0
