"""``ctxbus outcome record`` (how a session or a task went) and ``ctxbus bench outcomes`` (the inference's accuracy)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from dataclasses import asdict
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.learning.record import (
    RECORDABLE,
    OutcomeError,
    apply_locally,
    bus_of,
    outcome_event,
    publish,
    receipt,
)
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.settings import Settings


def register(sub: Any) -> None:
    outcome = sub.add_parser("outcome", help="record how a session or a task went (the learning loop counts it)")
    osub = outcome.add_subparsers(dest="outcome_command", required=True)
    rec = osub.add_parser(
        "record",
        help="publish an outcome event (ctxbus.context.outcome.recorded.v1); with no broker, apply it to the store",
    )
    add_project_option(rec, "the project (tenant) the session or task belongs to")
    scope = rec.add_mutually_exclusive_group(required=True)
    scope.add_argument("--session", help="the session whose injected items the outcome counts for")
    scope.add_argument("--task", help="the task whose injected items the outcome counts for")
    rec.add_argument("--outcome", required=True, choices=RECORDABLE)
    rec.add_argument("--notes", help="free text kept with the event (at most 10,000 characters)")
    rec.add_argument("--source", default="cli", help="who says so (default: cli)")
    rec.set_defaults(handler=cmd_outcome_record)


def register_bench(bsub: Any) -> None:
    """``ctxbus bench outcomes`` (called by ``stack_cmds.register`` beside the other benchmarks)."""
    bench = bsub.add_parser(
        "outcomes", help="outcome inference: accuracy per outcome and confusion matrix on the labelled transcripts"
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=cmd_bench_outcomes)


def cmd_outcome_record(args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        event = outcome_event(
            project_of(args),
            args.outcome,
            session_id=args.session,
            task_id=args.task,
            notes=args.notes,
            source=args.source,
        )
    except OutcomeError as exc:
        raise CliError(str(exc)) from exc
    config = bus_of(settings)
    if config is not None:
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its connection errors come back as one line
        try:
            asyncio.run(publish(config, _topics(settings), event, "cli"))
        except OutcomeError as exc:
            raise CliError(str(exc), 1) from exc
        done = receipt(event, "bus")
    else:
        counted, updated = _apply_here(settings, event)
        print(f"ctxbus: no broker running: applied to the store in {settings.data_dir}", file=sys.stderr)
        done = receipt(event, "local", counted, updated)
    print(json.dumps({k: v for k, v in asdict(done).items() if v is not None}))
    return 0


def _topics(settings: Settings) -> Any:
    from ctxbus.contract.topics import Topics  # noqa: PLC0415

    return Topics(settings.topic_prefix)


def _apply_here(settings: Settings, event: Any) -> tuple[int, int]:
    """The stack is stopped: this process owns the store (the embedder is not loaded, only its identity)."""
    from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder  # noqa: PLC0415
    from ctxbus.components import open_store  # noqa: PLC0415

    try:
        store = open_store(settings, OnnxMiniLmEmbedder(settings.embedder))
    except StoreBusy as exc:
        raise CliError(
            f"the memory store is in use by another process and no broker is running to send the outcome to: {exc}",
            1,
        ) from exc
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc
    try:
        return apply_locally(settings, store, event)
    finally:
        store.close()


def cmd_bench_outcomes(args: argparse.Namespace) -> int:
    from ctxbus.bench import outcomes  # noqa: PLC0415

    try:
        result = outcomes.run()
    except ValueError as exc:
        raise CliError(str(exc), 1) from exc
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        outcomes.print_report(result)
    return 0
