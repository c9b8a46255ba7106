"""``ctxbus memory import``: add memories to the store the services search (``list``, ``show``, ``forget``,
``pin``, ``unpin``: :mod:`ctxbus.cli.memory_view_cmds`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError

from ctxbus.adapters.file_refs import with_files
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import Stored, StoredReplies, send_upserts
from ctxbus.cli import memory_sync_cmds, memory_view_cmds
from ctxbus.cli.errors import CliError
from ctxbus.cli.import_report import direct_report, stored_report
from ctxbus.cli.progress import Progress
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryUpserted
from ctxbus.contract.topics import Topics
from ctxbus.gateway.sync_state import root_of
from ctxbus.hooks.fallback import HOME_PATTERNS
from ctxbus.memory import global_scope
from ctxbus.memory.ingest import IngestReport, ingest
from ctxbus.memory.ingest import Progress as ProgressCallback
from ctxbus.memory.jsonl_file import parse_jsonl
from ctxbus.memory.markdown_file import parse_markdown
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem
from ctxbus.memory.parse_result import MemoryFileError, ParsedMemories
from ctxbus.memory.pattern_file import ParsedPatterns, PatternFileError, merge_pattern_files, parse_pattern_file
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

MARKDOWN_SUFFIXES = (".md", ".markdown")
#: how long ``--wait`` waits for the store owner's answers by default, in seconds
DEFAULT_TIMEOUT_S = 300.0
#: exit code when some items were rejected (bad lines or patterns, or refused by the store's owner)
EXIT_REJECTED = 3
#: exit code when ``--wait`` ran out of time before every item was confirmed
EXIT_TIMEOUT = 4


def register(sub: Any) -> None:
    memory = sub.add_parser("memory", help="manage the memories ctxbus injects")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    imp = msub.add_parser(
        "import",
        help="import memories into a project: a learned-patterns .json (seed 002), .jsonl memory items, "
        "or a markdown document (ADRs, conventions) chunked by heading",
    )
    imp.add_argument("file", type=Path)
    add_project_option(imp, "the project to import into")
    imp.add_argument(
        "--with-home",
        action="store_true",
        help="for a learned-patterns file: merge it over the user's ~/.claude/learned_patterns.json "
        "(seed 002: same pattern_id, the project's wins)",
    )
    imp.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with the stack running (through the bus): return only once the store's owner has stored every item "
        "and it is searchable, with the counts (default); --no-wait returns once the events are published",
    )
    imp.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long --wait waits for the store's answers (default {DEFAULT_TIMEOUT_S:.0f}); past it the command "
        f"says how many items are confirmed and exits {EXIT_TIMEOUT}",
    )
    imp.add_argument(
        "--global",
        dest="allow_global",
        action="store_true",
        help=f'allow items of the global scope ({GLOBAL_PROJECT!r} or "global" in a .jsonl line: every project '
        "reads them); without it such items are rejected and the others imported",
    )
    imp.add_argument(
        "--allow-forgotten",
        action="store_true",
        help="add again items that were forgotten (`ctxbus memory forget`); without it they are rejected",
    )
    imp.set_defaults(handler=cmd_import)
    memory_view_cmds.register(msub)
    memory_sync_cmds.register(msub)


def parse_file(path: Path, project: str, *, home: Path | None = None) -> ParsedPatterns | ParsedMemories:
    """By file type: ``.jsonl`` memory items, ``.md`` documents chunked by heading, else a learned-patterns file
    (merged over ``home``'s ``.claude/learned_patterns.json`` when ``home`` is given)."""
    suffix = path.suffix.lower()
    if home is not None and (suffix == ".jsonl" or suffix in MARKDOWN_SUFFIXES):
        raise CliError("--with-home applies to learned-patterns files (.json), not to JSON lines or markdown")
    try:
        if home is not None:
            return merge_pattern_files(path, home / HOME_PATTERNS, project=project)
        if suffix == ".jsonl":
            return parse_jsonl(path, project=project)
        if suffix in MARKDOWN_SUFFIXES:
            return parse_markdown(path, project=project)
        return parse_pattern_file(path, project=project)
    except (PatternFileError, MemoryFileError) as exc:
        raise CliError(str(exc)) from exc


def import_direct(
    settings: Settings,
    items: Sequence[MemoryItem],
    progress: ProgressCallback | None = None,
    *,
    allow_forgotten: bool = False,
) -> tuple[IngestReport, list[tuple[MemoryItem, str]]]:
    """Embed and store in this process (forgotten items refused, with why, unless ``allow_forgotten``); raises
    StoreBusy when the running stack owns the store."""
    from ctxbus.api import library_embedder_settings  # noqa: PLC0415
    from ctxbus.components import open_embedder, open_store  # noqa: PLC0415  (loads the model)
    from ctxbus.retriever.curation_record import admit_locally  # noqa: PLC0415

    embedder = open_embedder(library_embedder_settings(settings))
    store = open_store(settings, embedder)
    try:
        admitted, refused = admit_locally(settings, items, datetime.now(UTC), allow_forgotten=allow_forgotten)
        return ingest(admitted, embedder, store, progress=progress), refused
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class BusImport:
    """What an import through the bus got back: the answers (in the order of the events) and whether all came."""

    events: int
    items: int
    answers: tuple[Stored, ...]
    complete: bool


async def import_through_bus(
    settings: Settings,
    project: str,
    items: Sequence[MemoryItem],
    *,
    wait: bool,
    timeout_s: float,
    progress: ProgressCallback | None = None,
    global_write: bool = False,
    allow_forgotten: bool = False,
) -> BusImport:
    """Send the items to the store's owner (``memory.upserted``, at most MAX_ITEMS_PER_UPSERT an event, halved
    until each fits the record limit); with ``wait``, read its ``memory.stored`` answers (by correlation id) until
    all came or ``timeout_s`` passed. ``global_write``: the records carry the marker global items need."""
    config = kafka_config(settings)
    topics = Topics(settings.topic_prefix)
    async with EventPublisher(config, "cli", schemas_topic=topics.schemas) as publisher:

        async def send(replies: StoredReplies | None) -> list[Envelope[MemoryUpserted]]:
            return await send_upserts(
                publisher,
                topics.memory_upserted,
                items,
                project=project,
                session_id="memory-import",
                producer="cli",
                replies=replies,
                global_write=global_write,
                allow_forgotten=allow_forgotten,
            )

        if not wait:
            events = await send(None)
            return BusImport(len(events), len(items), (), complete=False)
        async with StoredReplies(config, topics.memory_stored) as replies:
            events = await send(replies)
            if progress is not None:
                progress(0, len(items))

            def answered(_: Stored) -> None:
                if progress is not None:
                    progress(replies.confirmed_items, len(items))

            complete = await replies.wait(timeout_s, answered)
            got = tuple(replies.answers[str(e.event_id)] for e in events if str(e.event_id) in replies.answers)
            return BusImport(len(events), len(items), got, complete)


def _emit(lines: Sequence[dict[str, object]]) -> None:
    for line in lines:
        print(json.dumps(line), flush=True)


def cmd_import(args: argparse.Namespace) -> int:
    settings = Settings()
    project = project_of(args)
    if not args.file.is_file():
        raise CliError(f"{args.file}: no such file")
    if not args.timeout > 0:
        raise CliError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    parsed = parse_file(args.file, project, home=Path.home() if args.with_home else None)
    items, refused = global_scope.split(parsed.items, args.allow_global)
    # the repository's files an item mentions are recorded with their hashes: staleness reads them
    items = with_files(items, root_of(str(Path.cwd())))
    _emit([{"error": str(err)} for err in parsed.errors])
    _emit([{"error": f"{i.id} ({i.project}): {global_scope.refusal(global_scope.CLI_FLAG)}"} for i in refused])
    rejected = len(parsed.errors) + len(refused)
    result: dict[str, object] = {"rejected": rejected, "project": project}
    progress = Progress("ctxbus: storing")
    try:
        try:
            report, forgotten = import_direct(settings, items, progress, allow_forgotten=args.allow_forgotten)
        finally:
            progress.close()
        lines, counts = direct_report(report)
        _emit(lines)
        _emit([{"error": f"{i.id} ({i.project}): {why}"} for i, why in forgotten])
        rejected += len(forgotten)
        result |= counts | {"via": "store", "rejected": rejected}
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc
    except StoreBusy as exc:
        # another process owns the store (``ctxbus up``, or a ``ctxbus run retriever`` on a configured broker): the
        # memories go to it through the broker, when there is one to reach
        try:
            kafka_config(settings)
        except NoBroker:
            raise CliError(
                f"{exc}. No broker to send the memories through: set CTXBUS_KAFKA_BOOTSTRAP_SERVERS to the broker "
                "the services use (for `ctxbus run` services), or start the stack with `ctxbus up`",
                1,
            ) from exc
        return through_bus(settings, args, project, items, result)
    print(json.dumps(result))
    return 0 if not rejected else EXIT_REJECTED


def through_bus(
    settings: Settings, args: argparse.Namespace, project: str, items: Sequence[MemoryItem], result: dict[str, object]
) -> int:
    via = Topics(settings.topic_prefix).memory_upserted
    progress = Progress("ctxbus: stored by the running stack")
    config = kafka_config(settings)
    try:
        sent = asyncio.run(
            import_through_bus(
                settings,
                project,
                items,
                wait=args.wait,
                timeout_s=args.timeout,
                progress=progress,
                global_write=args.allow_global,
                allow_forgotten=args.allow_forgotten,
            )
        )
    except (KafkaError, LookupError) as exc:  # LookupError: the topics are missing
        raise CliError(
            f"the store is in use by another process, and the memories cannot go through the broker: cannot reach "
            f"the broker at {config.bootstrap_servers}: {exc or type(exc).__name__}",
            1,
        ) from exc
    finally:
        progress.close()
    if not args.wait:
        print(json.dumps(result | {"queued": sent.items, "via": via}))
        return 0 if not result["rejected"] else EXIT_REJECTED
    lines, counts = stored_report(sent.answers)
    _emit(lines)
    confirmed = sum(len(a.payload.results) for a in sent.answers)
    summary = result | counts | {"rejected": int(str(result["rejected"])) + counts["rejected"]}
    summary |= {"via": via, "confirmed": confirmed}
    if not sent.complete:
        summary |= {"pending": sent.items - confirmed, "timed_out": True}
        print(json.dumps(summary))
        print(
            f"ctxbus: error: the store's owner confirmed {confirmed} of {sent.items} items within {args.timeout:g} s; "
            "the others are queued and will still be stored (importing the file again is safe)",
            file=sys.stderr,
        )
        return EXIT_TIMEOUT
    print(json.dumps(summary))
    return 0 if not summary["rejected"] else EXIT_REJECTED
