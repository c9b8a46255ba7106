"""``ctxbus request``, ``ctxbus tail`` and ``ctxbus injections``: talking to a running pipeline."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer

from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.adapters.kafka.reply import request_explained
from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.cli.request_explain import explain, why_empty
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted, RetrievalRequested, TaskType, Trigger
from ctxbus.contract.serde import EventDecodeError, EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import deadline_for
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings


def register(sub: Any) -> None:
    req = sub.add_parser("request", help="send a retrieval request and print the injected context")
    req.add_argument("prompt", help="the prompt or task description")
    add_project_option(req)
    req.add_argument("--session", default="cli", help="session id (default: cli)")
    req.add_argument("--agent", default="cli")
    req.add_argument("--role", default="implementer")
    req.add_argument("--domain", help="the task's domain (a ranking signal; detected from the prompt when not given)")
    req.add_argument("--strict-domain", action="store_true", help="with --domain: only items of that domain")
    req.add_argument("--task-type", choices=[t.value for t in TaskType], help="default: classified from the prompt")
    req.add_argument("--trigger", choices=[t.value for t in Trigger], default=Trigger.USER_PROMPT.value)
    req.add_argument("--max-items", type=int, default=10)
    req.add_argument("--max-chars", type=int, default=10_000)
    req.add_argument("--max-tokens", type=int, default=2_000)
    req.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait for the injection; also the request's deadline (read after it, the request is "
        "answered 'expired' without any work)",
    )
    req.add_argument("--task", help="task id (retry, fallback and helper triggers get its pre-context)")
    req.add_argument("--failed-provider", help="the provider that just failed (fallback trigger)")
    req.add_argument("--failure-reason", help="why it failed (fallback trigger)")
    req.add_argument("--json", action="store_true", help="print the injected event as JSON")
    req.add_argument(
        "--explain", action="store_true", help="print each ranked item's score and its breakdown on stderr"
    )
    req.set_defaults(handler=cmd_request)
    tail = sub.add_parser("tail", help="print injection events as they happen")
    tail.add_argument("--project")
    tail.add_argument("--from-beginning", action="store_true")
    tail.add_argument("--max-events", type=int, default=0, help="stop after this many (0: never)")
    tail.add_argument("--json", action="store_true")
    tail.set_defaults(handler=cmd_tail)
    inj = sub.add_parser("injections", help="query the recorder's record of injections (JSON lines)")
    inj.add_argument("--project")
    inj.add_argument("--correlation-id")
    inj.add_argument("--limit", type=int, default=20)
    inj.set_defaults(handler=cmd_injections)


def _config(settings: Settings) -> Any:
    try:
        return kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc


def cmd_request(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.strict_domain and not (args.domain and args.domain.strip()):
        raise CliError("--strict-domain needs --domain")
    if not args.timeout > 0:
        raise CliError(f"--timeout must be positive, got {args.timeout:g}")
    now = datetime.now(UTC)
    try:
        payload = RetrievalRequested(
            agent_name=args.agent,
            agent_role=args.role,
            domain=args.domain,
            strict_domain=args.strict_domain,
            task_type=TaskType(args.task_type) if args.task_type else None,
            prompt=args.prompt,
            max_items=args.max_items,
            max_chars=args.max_chars,
            max_tokens=args.max_tokens,
            trigger=Trigger(args.trigger),
            task_id=args.task,
            failed_provider=args.failed_provider,
            failure_reason=args.failure_reason,
            deadline=deadline_for(now, args.timeout),  # this command stops waiting after --timeout
        )
        event = Envelope.root(payload, project=project_of(args), session_id=args.session, producer="cli", now=now)
    except ValueError as exc:
        raise CliError(f"invalid request: {exc}") from exc
    injected, completed, elapsed = asyncio.run(_request(settings, event, args.timeout))
    if args.json:
        print(injected.model_dump_json(indent=2))
        return 0
    p = injected.payload
    done = completed.payload if completed is not None else None
    print(p.context or f"(no context: {p.empty_reason})")
    for line in why_empty(p, done) + (explain(p, done) if args.explain else []):
        print(line, file=sys.stderr)
    print(
        f"\n-- {len(p.item_ids)} items, {p.context_chars} chars, ~{p.token_estimate} tokens; "
        f"retrieval {p.retrieval_duration_ms} ms, assembly {p.assembly_duration_ms:.1f} ms, "
        f"end to end {elapsed * 1000:.1f} ms; correlation {injected.correlation_id}",
        file=sys.stderr,
    )
    return 0


async def _request(
    settings: Settings, event: Envelope[RetrievalRequested], timeout_s: float
) -> tuple[Envelope[ContextInjected], Envelope[RetrievalCompleted] | None, float]:
    config = _config(settings)
    topics = Topics(settings.topic_prefix)
    started = time.perf_counter()
    try:
        injected, completed = await request_explained(config, topics, event, timeout_s, client_id="cli")
    except TimeoutError as exc:
        raise CliError(
            f"no injection within {timeout_s} s (correlation {event.correlation_id}): is the stack running?", 1
        ) from exc
    return injected, completed, time.perf_counter() - started


def cmd_tail(args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        return asyncio.run(_tail(settings, args))
    except KeyboardInterrupt:
        return 0


async def _tail(settings: Settings, args: argparse.Namespace) -> int:
    config = _config(settings)
    topic = Topics(settings.topic_prefix).context_injected
    options = {**config.consumer("tail", None), "auto_offset_reset": "earliest" if args.from_beginning else "latest"}
    consumer = AIOKafkaConsumer(topic, **options)
    deserialize = EventDeserializer()
    seen = 0
    await consumer.start()
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for rec in records:
                    try:
                        event = deserialize(rec.value)
                    except EventDecodeError as exc:
                        print(f"# skipped offset {rec.offset}: {exc.reason}: {exc}", file=sys.stderr)
                        continue
                    if args.project and event.project != args.project:
                        continue
                    _print_injection(event, as_json=args.json)  # type: ignore[arg-type]
                    seen += 1
                    if args.max_events and seen >= args.max_events:
                        return 0
    finally:
        await consumer.stop()


def _print_injection(event: Envelope[ContextInjected], *, as_json: bool) -> None:
    p = event.payload
    if as_json:
        print(event.model_dump_json(), flush=True)
        return
    e2e = ""
    if p.request_emitted_at is not None:
        e2e = f" e2e={(event.emitted_at - p.request_emitted_at).total_seconds() * 1000:.1f}ms"
    print(
        f"{event.emitted_at:%H:%M:%S.%f} {event.project} session={event.session_id} agent={p.agent_name} "
        f"trigger={p.trigger.value} items={len(p.item_ids)} chars={p.context_chars} tokens~{p.token_estimate}"
        f"{e2e}" + (f" empty={p.empty_reason}" if p.empty_reason else ""),
        flush=True,
    )


def cmd_injections(args: argparse.Namespace) -> int:
    settings = Settings()
    if not settings.record_db.exists():
        raise CliError(f"no injection record yet at {settings.record_db}: has the recorder run?", 1)
    record = InjectionRecord(settings.record_db)
    try:
        for row in record.recent(project=args.project, correlation_id=args.correlation_id, limit=args.limit):
            print(json.dumps(row.as_dict()))
    finally:
        record.close()
    return 0
