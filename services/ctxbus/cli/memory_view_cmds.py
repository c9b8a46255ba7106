"""``ctxbus memory list|show|forget|pin|unpin``: see the memory and steer it.

With no stack running the store is opened here and changed at once. While the stack runs (it owns the store),
``list`` and ``show`` read through its gateway, and ``forget``, ``pin`` and ``unpin`` are published on
``memory.curated`` for the store's owner to apply (so a restart or a replay keeps them); the command then waits
until the gateway shows the change. See docs/memory.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.cli.project_option import add_project_option, project_of
from ctxbus.contract.payloads import CurationAction
from ctxbus.core.listing import KINDS, UnknownItem, table
from ctxbus.settings import Settings

#: how long forget/pin wait by default for the running stack to apply them, in seconds
DEFAULT_WAIT_S = 60.0
_POLL_S = 0.1


def register(msub: Any) -> None:
    lst = msub.add_parser("list", help="list memory items: id, kind, source, conviction, uses, title")
    add_project_option(lst, "only this project's items")
    lst.add_argument("--all-projects", action="store_true", help="every project's items (and the global scope's)")
    lst.add_argument("--kind", choices=KINDS)
    lst.add_argument("--source", help="only items whose source contains this text (case-insensitive)")
    lst.add_argument(
        "--stale",
        action="store_true",
        help="only stale items: those another item superseded (kept for history, never retrieved); "
        "without it, only live ones",
    )
    lst.add_argument("--pinned", action="store_true", help="only pinned items")
    lst.add_argument("--json", action="store_true", help="one JSON object per item instead of the table")
    lst.set_defaults(handler=cmd_list)
    show = msub.add_parser("show", help="one item whole: content, conviction, outcomes, injections, near copies")
    show.add_argument("id")
    add_project_option(show)
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=cmd_show)
    for name, action, text in (
        ("forget", CurationAction.FORGET, "forget items: deleted, and never written again by a re-import or replay"),
        ("pin", CurationAction.PIN, "pin an item: a fixed ranking boost, never lowered by learning"),
        ("unpin", CurationAction.UNPIN, "unpin an item"),
    ):
        cmd = msub.add_parser(name, help=text)
        cmd.add_argument("ids", nargs="+" if action is CurationAction.FORGET else 1, metavar="ID")
        add_project_option(cmd)
        cmd.add_argument("--note", help="why (kept with the event)")
        cmd.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_WAIT_S,
            metavar="SECONDS",
            help="with the stack running: how long to wait until it has applied the change "
            f"(default {DEFAULT_WAIT_S:.0f})",
        )
        cmd.set_defaults(handler=cmd_curate, action=action)


def _local() -> Any:
    """The store opened here (a Memory), or None when the running stack owns it."""
    from ctxbus.cli.library_cmds import _open  # noqa: PLC0415

    return _open(Settings())


def _post(path: str, body: dict[str, Any]) -> Any:
    from ctxbus.cli.library_cmds import gateway_post as post  # noqa: PLC0415

    return post(Settings(), path, body)


def _show_remote(project: str, item_id: str) -> dict[str, Any] | None:
    """The item through the running stack's gateway; None when it does not hold it."""
    try:
        document: dict[str, Any] = _post("/v1/memory/show", {"project": project, "id": item_id})
    except CliError as exc:
        if "no memory item" in str(exc):
            return None
        raise
    return document


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {"kind": args.kind, "source": args.source, "stale": args.stale, "pinned": True if args.pinned else None}


def cmd_list(args: argparse.Namespace) -> int:
    args.project = None if args.all_projects else project_of(args)
    memory = _local()
    filters = {k: v for k, v in _filters(args).items() if v is not None}
    if memory is None:
        rows: list[dict[str, Any]] = _post("/v1/memory/list", {"project": args.project, **filters})["items"]
    else:
        with memory:
            rows = memory.rows(args.project, **filters)
    if args.json:
        for r in rows:
            print(json.dumps(r, ensure_ascii=False))
        return 0
    for line in table(rows, shutil.get_terminal_size((120, 24)).columns):
        print(line)
    return 0


def _print_document(doc: dict[str, Any]) -> None:
    outcomes = doc["outcomes"]
    rate = "-" if doc["success_rate"] is None else f"{doc['success_rate']:.2f}"
    facts = [
        ("id", doc["id"]),
        ("project", doc["project"]),
        ("kind", doc["kind"]),
        ("title", doc["title"]),
        ("source", doc["source"] or "-"),
        ("conviction", f"{doc['conviction']:.2f} (imported {doc['imported_confidence']:.2f})"),
        ("pinned", "yes" if doc["pinned"] else "no"),
        ("stale", f"yes (superseded by {doc['superseded_by']})" if doc["stale"] else "no"),
        ("uses", str(doc["uses"])),
        (
            "outcomes",
            f"{outcomes['successful']} successful, {outcomes['partial']} partial, {outcomes['failed']} failed",
        ),
        ("success rate", rate),
        ("injections", f"{doc['injections']} (last {doc['last_injected'] or 'never'})"),
        ("cluster", f"{doc['cluster_id'] or doc['id']}; near copies: {', '.join(doc['near_copies']) or 'none'}"),
        ("domains", ", ".join(doc["domains"]) or "-"),
        ("updated", doc["updated_at"]),
    ]
    for key, value in facts:
        print(f"{key + ':':<14}{value}")
    print()
    print(doc["content"])


def cmd_show(args: argparse.Namespace) -> int:
    args.project = project_of(args)
    memory = _local()
    if memory is None:
        doc = _show_remote(args.project, args.id)
        if doc is None:
            raise CliError(f"no memory item {args.id!r} in project {args.project!r}", 1)
    else:
        with memory:
            try:
                doc = memory.get(args.id, project=args.project)
            except UnknownItem as exc:
                raise CliError(str(exc), 1) from exc
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
    else:
        _print_document(doc)
    return 0


def _applied(action: CurationAction, doc: dict[str, Any] | None) -> bool:
    if action is CurationAction.FORGET:
        return doc is None
    return doc is not None and doc["pinned"] is (action is CurationAction.PIN)


def cmd_curate(args: argparse.Namespace) -> int:
    args.project = project_of(args)
    from ctxbus.retriever.curation_record import CurationError  # noqa: PLC0415

    action: CurationAction = args.action
    ids = list(dict.fromkeys(args.ids))
    if not args.timeout > 0:
        raise CliError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    memory = _local()
    if memory is not None:
        with memory:
            for item_id in ids:
                try:
                    memory.get(item_id, project=args.project)
                except UnknownItem as exc:
                    raise CliError(str(exc), 1) from exc
            try:
                done = memory._sync(memory.acurate(args.project, action, ids, note=args.note, source="cli"))
            except CurationError as exc:
                raise CliError(str(exc), 1) from exc
        print(json.dumps({"action": action.value, "project": args.project, "ids": ids, "via": done.via}))
        return 0
    return _through_bus(args, action, ids)


def _through_bus(args: argparse.Namespace, action: CurationAction, ids: list[str]) -> int:
    from ctxbus.contract.topics import Topics  # noqa: PLC0415
    from ctxbus.retriever.curation_record import CurationError, curation_event, publish  # noqa: PLC0415
    from ctxbus.runtime import kafka_config  # noqa: PLC0415

    settings = Settings()
    for item_id in ids:  # an unknown id is the user's error, said before anything is published
        if _show_remote(args.project, item_id) is None:
            raise CliError(f"no memory item {item_id!r} in project {args.project!r}", 1)
    topics = Topics(settings.topic_prefix)
    try:
        event = curation_event(args.project, action, ids, note=args.note, source="cli")
        asyncio.run(publish(kafka_config(settings), topics, event, "cli"))
    except CurationError as exc:
        raise CliError(str(exc), 1) from exc
    deadline = time.monotonic() + args.timeout
    pending = list(ids)
    while pending:
        pending = [i for i in pending if not _applied(action, _show_remote(args.project, i))]
        if pending and time.monotonic() > deadline:
            raise CliError(
                f"published on {topics.memory_curated}, but the running stack had not applied it to "
                f"{', '.join(pending)} within {args.timeout:g} s (it still will)",
                4,
            )
        if pending:
            time.sleep(_POLL_S)
    line = {"action": action.value, "project": args.project, "ids": ids, "via": topics.memory_curated}
    print(json.dumps(line | {"event_id": str(event.event_id)}))
    return 0
