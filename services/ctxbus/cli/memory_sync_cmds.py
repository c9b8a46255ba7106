"""``ctxbus memory sync``: the directory's project documents and learned-pattern file into its memory, now.

What the gateway does at every SessionStart (:mod:`ctxbus.gateway.pattern_sync`), on demand: ``CLAUDE.md``,
``AGENTS.md``, ``CONTRIBUTING.md``, the ADRs and ``.claude/learned_patterns.json`` (merged over the home file),
one item per heading, when they changed since the last sync; a section that is gone retires its item. The state
is the one the gateway keeps, so a sync made here is not made again at the next session start. With no stack
running the store is opened here and changed at once; while the stack runs (it owns the store), the items and the
retirements go to it through the bus, and the command waits for its answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError

from ctxbus.adapters.file_refs import restamped
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.contract.payloads import CurationAction
from ctxbus.contract.topics import Topics
from ctxbus.gateway.pattern_sync import PatternSync
from ctxbus.gateway.sync_state import Pending, SyncState, root_of
from ctxbus.memory.ingest import Action, ingest
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

#: the note a retirement carries
RETIRED_NOTE = "its section is gone from the project's documents"


def register(msub: Any) -> None:
    sync = msub.add_parser(
        "sync",
        help="read the directory's CLAUDE.md, AGENTS.md, CONTRIBUTING.md, ADRs and learned-pattern file into the "
        "project's memory now (as every session start does); deleted sections retire their items",
    )
    add_project_option(sync, "the project to sync into")
    sync.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="wait for the store's answers")
    sync.set_defaults(handler=cmd_sync)


def sync_state(settings: Settings) -> SyncState:
    return SyncState(settings.data_dir / "pattern-sync", settings.hook.patterns_file, Path.home())


def cmd_sync(args: argparse.Namespace) -> int:
    settings = Settings()
    project = project_of(args)
    cwd = str(Path.cwd())
    state = sync_state(settings)
    pending = state.pending(cwd, project)
    try:
        facts = sync_locally(settings, state, project, pending, root_of(cwd))
    except StoreModelMismatch as exc:
        raise CliError(str(exc), 1) from exc
    except StoreBusy as exc:
        if pending is None:
            facts = {"project": project, "changed": False, "via": "none"}
        else:
            try:
                config = kafka_config(settings)
            except NoBroker:
                raise CliError(
                    f"{exc}. No broker to send the items through: start the stack with `ctxbus up`", 1
                ) from exc
            try:
                facts = asyncio.run(_through_bus(settings, project, cwd, args.timeout))
            except (KafkaError, LookupError, OSError) as err:
                why = f"{err or type(err).__name__}"
                raise CliError(f"cannot reach the broker at {config.bootstrap_servers}: {why}", 1) from err
    print(json.dumps(facts))
    return 4 if facts.get("timed_out") else 0


def sync_locally(
    settings: Settings, state: SyncState, project: str, pending: Pending | None, root: Path
) -> dict[str, Any]:
    """Store and retire in this process's own store, then mark the items whose named files were deleted or
    rewritten stale (and those back again fresh); raises StoreBusy when the running stack owns the store."""
    from ctxbus.api import library_embedder_settings  # noqa: PLC0415
    from ctxbus.components import open_embedder, open_store  # noqa: PLC0415  (loads the model)
    from ctxbus.retriever.curation_record import admit_locally, apply_locally, curation_event  # noqa: PLC0415

    embedder = open_embedder(library_embedder_settings(settings))
    store = open_store(settings, embedder)
    facts: dict[str, Any] = {"project": project, "changed": pending is not None, "via": "store"}
    try:
        now = datetime.now(UTC)
        if pending is not None:
            returning = pending.plan.returning if pending.plan else []
            retire = pending.plan.retire if pending.plan else []
            if retire:
                event = curation_event(project, CurationAction.FORGET, retire, note=RETIRED_NOTE)
                apply_locally(settings, store, event)
            admitted, refused = admit_locally(settings, pending.items, now, allow_forgotten=False)
            back, _ = admit_locally(settings, returning, now, allow_forgotten=True)
            report = ingest([*admitted, *back], embedder, store)
            counts = {action.value: report.count(action) for action in Action}
            skipped = [str(e) for e in pending.parsed.errors] if pending.parsed else [str(pending.unreadable)]
            skipped += pending.docs.errors if pending.docs else []
            state.record(project, pending, patterns=len(admitted) + len(back), skipped=skipped, **counts)
            facts |= counts | {"retired": retire, "refused": [f"{item.id}: {why}" for item, why in refused]}
        marked = restamped(store.items(project), root, now)
        if marked:
            ingest(marked, embedder, store)
        facts |= {"stale": {i.id: i.stale for i in marked if i.stale}, "fresh": [i.id for i in marked if not i.stale]}
    finally:
        store.close()
    return facts


async def _through_bus(settings: Settings, project: str, cwd: str, timeout_s: float) -> dict[str, Any]:
    config = kafka_config(settings)
    topics = Topics(settings.topic_prefix)
    async with EventPublisher(config, "cli", schemas_topic=topics.schemas) as publisher:
        sync = PatternSync(
            config,
            topics,
            publisher,
            state_dir=settings.data_dir / "pattern-sync",
            patterns_file=settings.hook.patterns_file,
            home=Path.home(),
            answer_timeout_s=timeout_s,
        )
        return {**await sync.sync_now(cwd, project), "via": topics.memory_upserted}
