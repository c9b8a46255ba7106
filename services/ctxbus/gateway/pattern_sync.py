"""SessionStart: a project's learned-pattern file and its own documents feed the store, so a project never starts
empty.

At every SessionStart the gateway looks at the project's pattern file (``.claude/learned_patterns.json`` at the
repository root, ``CTXBUS_HOOK_PATTERNS_FILE``) merged over ``~/.claude/learned_patterns.json``, as
``ctxbus memory import --with-home`` does (same pattern_id: the project's wins), and at the project's documents
(``CLAUDE.md``, ``AGENTS.md``, ``CONTRIBUTING.md``, the ADRs: :mod:`ctxbus.memory.project_docs`, one item per
heading). A sha256 of all these files' bytes, kept per project under ``DATA_DIR/pattern-sync/``, says cheaply
whether they changed since the last sync; when they did, the items go to the store's owner as ``memory.upserted``
events, and the new hash is recorded once the owner has answered (``memory.stored``) for every one of them, so a
sync that did not finish is tried again at the next session start. Re-sending an item is harmless (same project
and id: it replaces itself). A document's section that is gone since the last sync retires its item (a
``memory.curated`` forget, noted as such); should the section come back, the sync stores it again (only the
items it retired itself: an item a person forgot stays forgotten). ``ctxbus memory sync`` runs the same sync on
demand.

The sync runs in the background of the gateway: the hook waits for it at most a share of its budget (so the
context it asks for then holds the items), never more; the sync goes on after the hook has answered. Every
sync is logged: the project, the files, how many items and what the store did with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from ctxbus.adapters.file_refs import restamped
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import StoredReplies, send_upserts
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import CurationAction, MemoryAction, MemoryCurated
from ctxbus.contract.topics import Topics
from ctxbus.gateway.sync_state import Pending, SyncState, root_of
from ctxbus.memory.model import MemoryItem

log = structlog.get_logger("ctxbus.gateway.patterns")

#: share of a SessionStart hook's budget spent waiting for its project's sync before asking for context
WAIT_SHARE = 0.5
#: how long a sync waits for the store owner's answers before giving up (it is tried again next session)
ANSWER_TIMEOUT_S = 120.0
SESSION_ID = "pattern-sync"
#: the session the staleness marks travel in
STALENESS_SESSION = "memory-staleness"
PRODUCER = "gateway"


class PatternSync:
    def __init__(
        self,
        config: KafkaClientConfig,
        topics: Topics,
        publisher: EventPublisher,
        *,
        state_dir: Path,
        patterns_file: str,
        home: Path,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
        items_of: Callable[[str], list[MemoryItem]] | None = None,
    ) -> None:
        self._config = config
        self._topics = topics
        self._publisher = publisher
        self.state = SyncState(state_dir, patterns_file, home)
        self._answer_timeout_s = answer_timeout_s
        #: the project's stored items (the store's owner in this process), for the staleness check; None: no check
        self._items_of = items_of
        #: the sync in flight per project (a second SessionStart of the project joins it)
        self._running: dict[str, asyncio.Task[None]] = {}

    async def at_session_start(self, cwd: str | None, project: str, budget_s: float) -> float:
        """Start (or join) the project's sync and wait for it at most WAIT_SHARE of ``budget_s``; returns the
        budget left. Never raises: a failed sync is logged, and the hook goes on."""
        started = time.monotonic()
        task = self._running.get(project)
        if task is None:
            task = asyncio.create_task(self._sync(cwd, project))
            self._running[project] = task
            task.add_done_callback(lambda done: self._finished(project, done))
        try:
            await asyncio.wait_for(asyncio.shield(task), budget_s * WAIT_SHARE)
        except TimeoutError:
            log.info("pattern_sync_continues", project=project)
        except Exception as exc:  # the task logged it with its traceback; the hook goes on
            log.debug("pattern_sync_not_done", project=project, error=repr(exc))
        return max(0.05, budget_s - (time.monotonic() - started))

    def _finished(self, project: str, task: asyncio.Task[None]) -> None:
        if self._running.get(project) is task:
            del self._running[project]
        if not task.cancelled():
            task.exception()  # retrieved: it was logged where it happened

    async def close(self) -> None:
        """Stop the syncs in flight (a stopped sync records nothing: the next session start redoes it)."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def sync_now(self, cwd: str | None, project: str) -> dict[str, Any]:
        """Sync the project at ``cwd`` now (``ctxbus memory sync``): what was done, as the log line says it."""
        started = time.monotonic()
        pending = await asyncio.to_thread(self.state.pending, cwd, project)
        if pending is None:
            return {"project": project, "changed": False}
        return await self._send(project, pending, started)

    async def _sync(self, cwd: str | None, project: str) -> None:
        started = time.monotonic()
        try:
            pending = await asyncio.to_thread(self.state.pending, cwd, project)
            if pending is not None:
                await self._send(project, pending, started)
            await self.restamp(cwd, project)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pattern_sync_failed", project=project)
            raise

    async def restamp(self, cwd: str | None, project: str) -> list[str]:
        """Look again at the files the project's items name, and send the items whose staleness changed (a named
        file deleted or rewritten past recognition, or back again: ctxbus.core.staleness) to the store's owner,
        as upserts that carry the mark (so replay keeps it; what outcomes taught stays). Returns their ids."""
        if self._items_of is None:
            return []
        items = await asyncio.to_thread(self._items_of, project)
        changed = await asyncio.to_thread(restamped, items, root_of(cwd), datetime.now(UTC))
        if changed:
            await send_upserts(
                self._publisher,
                self._topics.memory_upserted,
                changed,
                project=project,
                session_id=STALENESS_SESSION,
                producer=PRODUCER,
            )
            log.info(
                "memory_staleness",
                project=project,
                stale={i.id: i.stale for i in changed if i.stale},
                fresh=[i.id for i in changed if not i.stale],
            )
        return [i.id for i in changed]

    async def _send(self, project: str, pending: Pending, started: float) -> dict[str, Any]:
        bad = [str(e) for e in pending.parsed.errors] if pending.parsed else [str(pending.unreadable)]
        bad += pending.docs.errors if pending.docs else []
        if pending.unreadable is not None:  # reported once per change; the documents still sync
            log.warning("pattern_sync_unreadable", project=project, error=pending.unreadable)
        plan = pending.plan
        items, returning = pending.items, (plan.returning if plan else [])
        retire = plan.retire if plan else []
        facts: dict[str, Any] = {"project": project, "changed": True, "items": len(items) + len(returning)}
        error = {"error": pending.unreadable} if pending.unreadable is not None else {}
        if not items and not returning and not retire:
            if pending.unreadable is None:
                log.warning("pattern_sync_no_patterns", project=project, skipped=bad)
            await asyncio.to_thread(self.state.record, project, pending, patterns=0, skipped=bad, **error)
            return facts | {"skipped": bad} | error
        async with StoredReplies(self._config, self._topics.memory_stored) as replies:
            for batch, again in ((items, False), (returning, True)):
                if batch:
                    await send_upserts(
                        self._publisher,
                        self._topics.memory_upserted,
                        batch,
                        project=project,
                        session_id=SESSION_ID,
                        producer=PRODUCER,
                        replies=replies,
                        allow_forgotten=again,
                    )
            if retire:
                await self._retire(project, retire, pending)
            complete = await replies.wait(self._answer_timeout_s) if items or returning else True
        results = [r for a in replies.answers.values() for r in a.payload.results]
        counts = {a.value: sum(1 for r in results if r.action is a) for a in MemoryAction}
        facts |= counts | {"retired": retire, "skipped": bad}
        if not complete:
            log.warning(
                "pattern_sync_unconfirmed",
                project=project,
                patterns=len(items) + len(returning),
                confirmed=len(results),
                timeout_s=self._answer_timeout_s,
            )
            return facts | {"confirmed": len(results), "timed_out": True}
        await asyncio.to_thread(
            self.state.record, project, pending, patterns=len(items) + len(returning), skipped=bad, **counts, **error
        )
        files = [str(p) for p in (pending.project_file, pending.home_file) if p.exists()]
        log.info(
            "pattern_sync",
            project=project,
            files=files + sorted(pending.docs.ids_by_doc if pending.docs else ()),
            patterns=[i.id for i in [*items, *returning]],
            retired=retire,
            skipped=bad,
            **counts,
            ms=round((time.monotonic() - started) * 1000, 1),
        )
        return facts

    async def _retire(self, project: str, ids: list[str], pending: Pending) -> None:
        """Forget the items whose section or document is gone (through the bus: the store's owner applies it)."""
        docs = sorted(pending.plan.ids_by_doc) if pending.plan else []
        note = "its section is gone from the project's documents" + (f" ({', '.join(docs)})" if docs else "")
        event = Envelope.root(
            MemoryCurated(action=CurationAction.FORGET, ids=tuple(ids), note=note[:2_000]),
            project=project,
            session_id=SESSION_ID,
            producer=PRODUCER,
        )
        await self._publisher.send(self._publisher.prepare(self._topics.memory_curated, event))
