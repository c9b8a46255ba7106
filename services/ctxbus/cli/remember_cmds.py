"""``ctxbus remember TEXT``: a principle of the project, stored at once (as a ``remember:`` prompt is).

The item is what session capture makes of ``remember: TEXT`` (ctxbus.capture: a principle, source ``captured``,
provenance ``cli``, redacted), stored like ``ctxbus memory import`` stores: in this process when the store is free,
else through the bus to the running stack's store owner.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from ctxbus.capture.items import SessionFacts, item_of
from ctxbus.capture.lessons import Lesson, RuleName, Said
from ctxbus.capture.redaction import capture_redactor
from ctxbus.capture.steps import Span
from ctxbus.cli import memory_cmds
from ctxbus.cli.errors import CliError
from ctxbus.cli.import_report import direct_report
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.memory.model import MAX_CONTENT_CHARS, MemoryItem
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

SESSION = "cli"


def register(sub: Any) -> None:
    cmd = sub.add_parser("remember", help="store a principle of the project at once (as a `remember:` prompt does)")
    cmd.add_argument("text", nargs="+", help="what to remember, in your words")
    add_project_option(cmd, "the project the principle belongs to")
    cmd.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with the stack running: return once the store's owner has stored it (default)",
    )
    cmd.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="how long --wait waits (60)")
    cmd.set_defaults(handler=cmd_remember)


def remembered_item(text: str, project: str, now: datetime | None = None) -> MemoryItem:
    """The principle ``ctxbus remember TEXT`` stores (the same id a ``remember: TEXT`` prompt gets)."""
    words = " ".join(text.split())
    if not words:
        raise CliError("nothing to remember: give the text, e.g. ctxbus remember 'we use pnpm, never npm'")
    if len(words) > MAX_CONTENT_CHARS:
        raise CliError(f"the text is {len(words)} characters; at most {MAX_CONTENT_CHARS} are kept in one memory")
    facts = SessionFacts(project, SESSION, "cli", None, now or datetime.now(UTC))
    return item_of(Lesson(RuleName.REMEMBER, Span(), Said(words, negative=False)), facts, redact=capture_redactor())


def cmd_remember(args: argparse.Namespace) -> int:
    settings = Settings()
    project = project_of(args)
    item = remembered_item(" ".join(args.text), project)
    result: dict[str, object] = {"id": item.id, "project": project, "rejected": 0}
    try:
        report, forgotten = memory_cmds.import_direct(settings, [item])
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc
    except StoreBusy as exc:
        try:
            kafka_config(settings)
        except NoBroker:
            raise CliError(f"{exc}. No broker to send it through: start the stack with `ctxbus up`", 1) from exc
        bus_args = argparse.Namespace(wait=args.wait, timeout=args.timeout, allow_global=False, allow_forgotten=False)
        return memory_cmds.through_bus(settings, bus_args, project, [item], result)
    _, counts = direct_report(report)
    for forgotten_item, why in forgotten:
        print(json.dumps({"error": f"{forgotten_item.id} ({forgotten_item.project}): {why}"}))
    print(json.dumps(result | counts | {"via": "store", "rejected": len(forgotten)}))
    return 0 if not forgotten else memory_cmds.EXIT_REJECTED
