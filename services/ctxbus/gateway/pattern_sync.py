"""SessionStart: a project's learned-pattern file feeds the store, so a project that has one never starts empty.

At every SessionStart the gateway looks at the project's pattern file (``.claude/learned_patterns.json`` at the
repository root, ``CTXBUS_HOOK_PATTERNS_FILE``) merged over ``~/.claude/learned_patterns.json``, as
``ctxbus memory import --with-home`` does (same pattern_id: the project's wins). A sha256 of both files' bytes,
kept per project under ``DATA_DIR/pattern-sync/``, says cheaply whether they changed since the last sync; when
they did, the patterns go to the store's owner as ``memory.upserted`` events, and the new hash is recorded once the
owner has answered (``memory.stored``) for every one of them, so a sync that did not finish is tried again at the
next session start. Re-sending a pattern is harmless (same project and id: it replaces itself).

The sync runs in the background of the gateway: the hook waits for it at most a share of its budget (so the
context it asks for then holds the patterns), never more; the sync goes on after the hook has answered. Every
sync is logged: the project, the files, how many patterns and what the store did with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import StoredReplies, send_upserts
from ctxbus.contract.payloads import MemoryAction
from ctxbus.contract.topics import Topics
from ctxbus.hooks.fallback import HOME_PATTERNS
from ctxbus.hooks.project import git_root
from ctxbus.memory.pattern_file import ParsedPatterns, PatternFileError, merge_pattern_files

log = structlog.get_logger("ctxbus.gateway.patterns")

#: share of a SessionStart hook's budget spent waiting for its project's sync before asking for context
WAIT_SHARE = 0.5
#: how long a sync waits for the store owner's answers before giving up (it is tried again next session)
ANSWER_TIMEOUT_S = 120.0
SESSION_ID = "pattern-sync"
PRODUCER = "gateway"


def files_digest(project_file: Path, home_file: Path) -> str | None:
    """sha256 of both files' bytes (a missing file counts as absent); None when neither exists."""
    digest = hashlib.sha256()
    present = False
    for label, path in ((b"project", project_file), (b"home", home_file)):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            digest.update(label + b"\0absent\0")
            continue
        present = True
        digest.update(label + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest() if present else None


def state_file(state_dir: Path, project: str) -> Path:
    """Where the digest last synced for ``project`` is kept (one small JSON file per project)."""
    return state_dir / f"{hashlib.sha256(project.encode()).hexdigest()[:32]}.json"


@dataclass(frozen=True, slots=True)
class Pending:
    """A change to sync: the files, their digest, and the patterns read from them (or why they cannot be)."""

    project_file: Path
    home_file: Path
    digest: str
    parsed: ParsedPatterns | None
    unreadable: str | None = None


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
    ) -> None:
        self._config = config
        self._topics = topics
        self._publisher = publisher
        self._state_dir = state_dir
        self._patterns_file = patterns_file
        self._home_file = home / HOME_PATTERNS
        self._answer_timeout_s = answer_timeout_s
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

    def _recorded(self, project: str) -> str | None:
        try:
            state = json.loads(state_file(self._state_dir, project).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        digest = state.get("digest") if isinstance(state, dict) else None
        return digest if isinstance(digest, str) else None

    def _record(self, project: str, pending: Pending, **facts: Any) -> None:
        self._state_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "project": project,
            "digest": pending.digest,
            "files": [str(pending.project_file), str(pending.home_file)],
            "synced_at": datetime.now(UTC).isoformat(),
            **facts,
        }
        path = state_file(self._state_dir, project)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.replace(path)

    def pending(self, cwd: str | None, project: str) -> Pending | None:
        """What there is to sync for the project at ``cwd``: None when no file exists or nothing changed."""
        base = cwd or str(Path.cwd())
        project_file = Path(git_root(base) or base) / self._patterns_file
        digest = files_digest(project_file, self._home_file)
        if digest is None or digest == self._recorded(project):
            return None
        try:
            parsed = merge_pattern_files(project_file, self._home_file, project=project)
        except PatternFileError as exc:
            return Pending(project_file, self._home_file, digest, None, unreadable=str(exc))
        return Pending(project_file, self._home_file, digest, parsed)

    async def _sync(self, cwd: str | None, project: str) -> None:
        started = time.monotonic()
        try:
            pending = await asyncio.to_thread(self.pending, cwd, project)
            if pending is None:
                return
            if pending.parsed is None:  # recorded, so that a broken file is reported once per change
                log.warning("pattern_sync_unreadable", project=project, error=pending.unreadable)
                await asyncio.to_thread(self._record, project, pending, error=pending.unreadable)
                return
            await self._send(project, pending, pending.parsed, started)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pattern_sync_failed", project=project)
            raise

    async def _send(self, project: str, pending: Pending, parsed: ParsedPatterns, started: float) -> None:
        bad = [str(e) for e in parsed.errors]
        if not parsed.items:
            log.warning("pattern_sync_no_patterns", project=project, skipped=bad)
            await asyncio.to_thread(self._record, project, pending, patterns=0, skipped=bad)
            return
        async with StoredReplies(self._config, self._topics.memory_stored) as replies:
            await send_upserts(
                self._publisher,
                self._topics.memory_upserted,
                parsed.items,
                project=project,
                session_id=SESSION_ID,
                producer=PRODUCER,
                replies=replies,
            )
            complete = await replies.wait(self._answer_timeout_s)
        results = [r for a in replies.answers.values() for r in a.payload.results]
        counts = {a.value: sum(1 for r in results if r.action is a) for a in MemoryAction}
        if not complete:
            log.warning(
                "pattern_sync_unconfirmed",
                project=project,
                patterns=len(parsed.items),
                confirmed=len(results),
                timeout_s=self._answer_timeout_s,
            )
            return
        await asyncio.to_thread(self._record, project, pending, patterns=len(parsed.items), skipped=bad, **counts)
        log.info(
            "pattern_sync",
            project=project,
            files=[str(p) for p in (pending.project_file, pending.home_file) if p.exists()],
            patterns=[i.id for i in parsed.items],
            skipped=bad,
            **counts,
            ms=round((time.monotonic() - started) * 1000, 1),
        )
