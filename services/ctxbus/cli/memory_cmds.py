"""``ctxbus memory import``: add memories to the store the services search."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.cli.errors import CliError
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MAX_ITEMS_PER_UPSERT, MemoryUpserted
from ctxbus.contract.topics import Topics
from ctxbus.hooks.fallback import HOME_PATTERNS
from ctxbus.memory.ingest import IngestReport, ingest
from ctxbus.memory.jsonl_file import parse_jsonl
from ctxbus.memory.markdown_file import parse_markdown
from ctxbus.memory.model import MemoryItem
from ctxbus.memory.parse_result import MemoryFileError, ParsedMemories
from ctxbus.memory.pattern_file import ParsedPatterns, PatternFileError, merge_pattern_files, parse_pattern_file
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import kafka_config, read_runtime
from ctxbus.settings import Settings

MARKDOWN_SUFFIXES = (".md", ".markdown")


def register(sub: Any) -> None:
    memory = sub.add_parser("memory", help="manage the memories ctxbus injects")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    imp = msub.add_parser(
        "import",
        help="import memories into a project: a learned-patterns .json (seed 002), .jsonl memory items, "
        "or a markdown document (ADRs, conventions) chunked by heading",
    )
    imp.add_argument("file", type=Path)
    imp.add_argument("--project", required=True)
    imp.add_argument(
        "--with-home",
        action="store_true",
        help="for a learned-patterns file: merge it over the user's ~/.claude/learned_patterns.json "
        "(seed 002: same pattern_id, the project's wins)",
    )
    imp.set_defaults(handler=cmd_import)


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


def import_direct(settings: Settings, items: Sequence[MemoryItem]) -> IngestReport:
    """Embed and store in this process; raises StoreBusy when the running stack owns the store."""
    from ctxbus.wiring import open_embedder, open_store  # noqa: PLC0415  (loads the model)

    embedder = open_embedder(settings)
    store = open_store(settings, embedder)
    try:
        return ingest(items, embedder, store)
    finally:
        store.close()


async def publish_upserts(settings: Settings, project: str, items: Sequence[MemoryItem]) -> int:
    """Send the items to the store's owner through the bus, in events of at most MAX_ITEMS_PER_UPSERT
    items that fit the record limit (a chunk over it is halved until it fits)."""
    config = kafka_config(settings)
    topic = Topics(settings.topic_prefix).memory_upserted

    async def send(publisher: EventPublisher, chunk: tuple[MemoryItem, ...]) -> None:
        event = Envelope.root(MemoryUpserted(items=chunk), project=project, session_id="memory-import", producer="cli")
        try:
            record = publisher.prepare(topic, event)
        except RecordTooLarge:
            if len(chunk) == 1:
                raise
            half = len(chunk) // 2
            await send(publisher, chunk[:half])
            await send(publisher, chunk[half:])
            return
        await publisher.send(record)

    async with EventPublisher(config, "cli", schemas_topic=Topics(settings.topic_prefix).schemas) as publisher:
        for start in range(0, len(items), MAX_ITEMS_PER_UPSERT):
            await send(publisher, tuple(items[start : start + MAX_ITEMS_PER_UPSERT]))
    return len(items)


def cmd_import(args: argparse.Namespace) -> int:
    settings = Settings()
    project = args.project.strip()
    if not project:
        raise CliError("--project must not be blank")
    if not args.file.is_file():
        raise CliError(f"{args.file}: no such file")
    parsed = parse_file(args.file, project, home=Path.home() if args.with_home else None)
    for err in parsed.errors:
        print(json.dumps({"error": str(err)}), flush=True)
    result: dict[str, object] = {"rejected": len(parsed.errors), "project": project}
    try:
        report = import_direct(settings, parsed.items)
        for merge in report.merged:
            kind = "exact" if merge.exact else "near"
            print(
                json.dumps(
                    {
                        "merged": merge.incoming_id,
                        "into": merge.existing_id,
                        "duplicate": kind,
                        "similarity": merge.similarity,
                    }
                ),
                flush=True,
            )
        for project_id, old in report.supersede_missing:
            print(json.dumps({"warning": f"supersedes {old!r} of {project_id!r}: no such item"}), flush=True)
        result |= {
            "imported": report.upserted,
            "merged": len(report.merged),
            "superseded": len(report.superseded),
            "via": "store",
        }
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc
    except StoreBusy as exc:
        if read_runtime(settings) is None:  # busy, but not by a stack we can reach
            raise CliError(str(exc), 1) from exc
        queued = asyncio.run(publish_upserts(settings, project, parsed.items))
        result |= {"queued": queued, "via": Topics(settings.topic_prefix).memory_upserted}
    print(json.dumps(result))
    return 0 if not parsed.errors else 3
