"""``ctxbus memory import``: add memories to the store the services search."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import PatternFileError, parse_pattern_file
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.settings import Settings


def register(sub: Any) -> None:
    memory = sub.add_parser("memory", help="manage the memories ctxbus injects")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    imp = msub.add_parser("import", help="import a learned-patterns file (seed 002 format) into a project")
    imp.add_argument("file", type=Path)
    imp.add_argument("--project", required=True)
    imp.set_defaults(handler=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from ctxbus.wiring import open_embedder, open_store  # noqa: PLC0415  (loads the model)

    settings = Settings()
    project = args.project.strip()
    if not project:
        raise CliError("--project must not be blank")
    if not args.file.is_file():
        raise CliError(f"{args.file}: no such file")
    try:
        parsed = parse_pattern_file(args.file, project=project)
    except PatternFileError as exc:
        raise CliError(str(exc)) from exc
    for err in parsed.errors:
        print(json.dumps({"error": str(err)}), flush=True)
    embedder = open_embedder(settings)
    try:
        store = open_store(settings, embedder)
    except (StoreBusy, StoreModelMismatch) as exc:
        raise CliError(str(exc), 1) from exc
    try:
        report = ingest(parsed.items, embedder, store)
    finally:
        store.close()
    print(json.dumps({"imported": report.upserted, "rejected": len(parsed.errors), "project": project}))
    return 0 if not parsed.errors else 3
