"""Session capture in the gateway: memory from Claude Code sessions by rules (ctxbus.capture), off the hook's path.

The gateway hands a hook input here only after its answer is written (``Response.after``): the hook's latency does
not include capture. Inputs wait in a bounded queue for one background worker:

- *PostToolUse / PostToolUseFailure* (Bash, Edit, Write, MultiEdit) and prompts are kept as the session's steps, for
  a session whose transcript the gateway cannot read;
- a prompt starting ``remember:`` is stored at once (a principle of the project);
- *Stop*, *PreCompact* (the last chance to read the whole history) and *SessionEnd*: the session's transcript (at
  most ``CTXBUS_CAPTURE_MAX_TRANSCRIPT_BYTES`` of its end) is read in a worker thread, the capture rules run over it,
  and the items that are new or changed since the session's last capture go to the store's owner as
  ``memory.upserted`` events (source ``captured``, provenance attached): replay rebuilds them.

Captured ids are deterministic, so capturing a session again (each Stop) re-sends nothing unchanged, and the store
counts a session once however often it is captured (ctxbus.memory.consolidate). Every text goes through ``redact``
before it leaves (the one call site: wiring injects the redaction). Capture is off with ``CTXBUS_CAPTURE=off``, for a
repository whose ``.claude/ctxbus.json`` says ``"capture": false``, and for directories and files matching
``CTXBUS_CAPTURE_EXCLUDE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import send_upserts
from ctxbus.capture.engine import capture_steps
from ctxbus.capture.items import RedactText, SessionFacts, item_of, no_redaction
from ctxbus.capture.lessons import Lesson, RuleName, Said
from ctxbus.capture.prompts import remembered
from ctxbus.capture.steps import PromptStep, Span, Step, TranscriptSteps, hook_step, lines_with_offsets
from ctxbus.contract.topics import Topics
from ctxbus.core.hook_evidence import TOOL_EVENTS
from ctxbus.gateway import transcript_file
from ctxbus.gateway.identity import project_of
from ctxbus.gateway.pattern_writer import write_learned
from ctxbus.hooks.client import session_of
from ctxbus.hooks.project import capture_allowed
from ctxbus.memory.model import MemoryItem
from ctxbus.settings import CaptureSettings

log = structlog.get_logger("ctxbus.gateway.capture")

PRODUCER = "gateway.capture"
#: hook events whose transcript is captured
TRANSCRIPT_EVENTS = ("Stop", "SessionEnd", "PreCompact")
CAPTURE_EVENTS = (*TRANSCRIPT_EVENTS, *TOOL_EVENTS, "UserPromptSubmit")
MAX_SESSIONS = 2_000
#: hook steps kept per session (for sessions without a readable transcript)
MAX_STEPS = 2_000
#: files larger than this are named without a content hash
MAX_HASHED_BYTES = 5_000_000


@dataclass
class _Session:
    project: str
    session_id: str
    answered: bool = False
    steps: list[Step] = field(default_factory=list)
    #: item id -> fingerprint of what was last sent for it
    sent: dict[str, str] = field(default_factory=dict)


def excluded(path: str | None, globs: tuple[str, ...]) -> bool:
    """Whether ``path`` or one of its parents matches one of ``globs``."""
    if not path or not globs:
        return False
    probe = os.path.normpath(path)
    while True:
        if any(fnmatch.fnmatch(probe, g) or fnmatch.fnmatch(probe, g.rstrip("/")) for g in globs):
            return True
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent


def file_hasher(cwd: str | None) -> Callable[[str], tuple[str | None, str | None] | None]:
    """sha256 of a named file's bytes now (relative paths from the session's directory); None when unreadable."""

    def digest(path: str) -> tuple[str | None, str | None] | None:
        full = path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)
        try:
            if os.path.getsize(full) > MAX_HASHED_BYTES:
                return None
            with open(full, "rb") as fh:
                return hashlib.sha256(fh.read()).hexdigest(), None
        except OSError:
            return None

    return digest


def fingerprint(item: MemoryItem) -> str:
    """What about an item makes it worth sending again (not its capture time)."""
    parts = (item.kind.value, item.title, item.content, *(f.path for f in item.files), str(item.outcome))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).hexdigest()


def read_transcript(path: str, max_bytes: int) -> tuple[list[Step], str | None]:
    """The steps of a transcript's last ``max_bytes`` (offsets are the file's) and the session's directory."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read(size - start)
    if start > 0:  # a cut line is no entry
        newline = data.find(b"\n")
        data, start = (data[newline + 1 :], start + newline + 1) if newline >= 0 else (b"", size)
    reader = TranscriptSteps()
    steps = reader.read(list(lines_with_offsets(data, start)))
    return steps, reader.cwd


class SessionCapture:
    def __init__(
        self,
        topics: Topics,
        publisher: EventPublisher,
        settings: CaptureSettings,
        *,
        redact: RedactText = no_redaction,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_sessions: int = MAX_SESSIONS,
        patterns_file: str = "",
    ) -> None:
        self._topics = topics
        self._publisher = publisher
        self._settings = settings
        self._globs = settings.exclude_globs
        self._redact = redact
        self._clock = clock
        self._max = max_sessions
        #: the project's learned-pattern file (relative to its root): a SessionEnd writes the lessons back to it
        #: when ``write_patterns`` is on
        self._patterns_file = patterns_file
        #: (hook event, hook input, when its answer was written)
        self._queue: asyncio.Queue[tuple[str, dict[str, Any], float]] = asyncio.Queue(maxsize=settings.queue)
        self._delay_s = settings.delay_ms / 1000.0
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        self._worker: asyncio.Task[None] | None = None
        #: captures done, by result (tests and the log read it)
        self.results: dict[str, int] = {}

    # -- the hook side: never blocks, never raises ---------------------------------------------------------------

    def wants(self, event: str) -> bool:
        return self._settings.enabled and event in CAPTURE_EVENTS

    def after_answer(self, event: str, hook_input: dict[str, Any]) -> None:
        """Queue a hook input for capture (called once its answer is written)."""
        if not self.wants(event):
            return
        if self._worker is None:
            self._worker = asyncio.create_task(self._work())
        try:
            self._queue.put_nowait((event, hook_input, time.monotonic()))
        except asyncio.QueueFull:
            self._count("dropped_queue_full")
            log.warning("capture_dropped", hook_event=event, reason="queue full")

    async def idle(self) -> None:
        """Wait until every queued input is captured (tests, and a clean stop)."""
        await self._queue.join()

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(BaseException):
                await self._worker
            self._worker = None

    # -- the worker --------------------------------------------------------------------------------------------

    def _count(self, result: str) -> None:
        self.results[result] = self.results.get(result, 0) + 1

    async def _work(self) -> None:
        while True:
            event, hook_input, answered_at = await self._queue.get()
            try:
                wait = answered_at + self._delay_s - time.monotonic()
                if wait > 0:  # the hook's process exits first (docs/capture.md: the Stop hook's latency)
                    await asyncio.sleep(wait)
                self._count(await self._capture(event, hook_input))
            except asyncio.CancelledError:
                raise
            except Exception:
                self._count("failed")
                log.exception("capture_failed", hook_event=event)
            finally:
                self._queue.task_done()

    def _session(self, project: str, session_id: str) -> _Session:
        key = (project, session_id)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(project, session_id)
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(key)
        return session

    async def _capture(self, event: str, hook_input: dict[str, Any]) -> str:
        cwd = hook_input.get("cwd") if isinstance(hook_input.get("cwd"), str) else None
        if excluded(cwd, self._globs):
            return "excluded_path"
        if not await asyncio.to_thread(capture_allowed, cwd):
            return "off_for_project"
        session = self._session(project_of(hook_input), session_of(hook_input))
        facts = SessionFacts(session.project, session.session_id, event, cwd, self._clock())
        if event in TOOL_EVENTS:
            step = await asyncio.to_thread(hook_step, hook_input)
            if step is not None and len(session.steps) < MAX_STEPS:
                session.steps.append(step)
            return "step_kept" if step is not None else "not_a_step"
        if event == "UserPromptSubmit":
            return await self._prompt(session, facts, hook_input)
        items = await asyncio.to_thread(self._items, session, facts, hook_input)
        if event == "Stop":
            session.answered = True
        result = await self._publish(session, items)
        if event == "SessionEnd":
            self._sessions.pop((session.project, session.session_id), None)
            if self._settings.write_patterns and self._patterns_file:
                await asyncio.to_thread(write_learned, facts.cwd, self._patterns_file, items, facts.now)
        return result

    async def _prompt(self, session: _Session, facts: SessionFacts, hook_input: dict[str, Any]) -> str:
        prompt = hook_input.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return "no_prompt"
        if len(session.steps) < MAX_STEPS:
            session.steps.append(PromptStep(prompt.strip(), session.answered))
        text = remembered(prompt)
        if text is None:
            return "prompt_kept"
        lesson = Lesson(RuleName.REMEMBER, Span(), Said(text, negative=False))
        return await self._publish(session, [item_of(lesson, facts, redact=self._redact)])

    def _items(self, session: _Session, facts: SessionFacts, hook_input: dict[str, Any]) -> list[MemoryItem]:
        path = transcript_file.usable(hook_input.get("transcript_path"))
        steps: list[Step] = session.steps
        if path is not None:
            try:
                steps, cwd = read_transcript(path, self._settings.max_transcript_bytes)
            except OSError:
                steps, cwd = session.steps, None
            if facts.cwd is None and cwd is not None:
                facts = SessionFacts(facts.project, facts.session_id, facts.hook_event, cwd, facts.now)
        items = capture_steps(steps, facts, redact=self._redact, file_hash=file_hasher(facts.cwd))
        base = facts.cwd or ""
        return [i for i in items if not any(excluded(os.path.join(base, f.path), self._globs) for f in i.files)]

    async def _publish(self, session: _Session, items: list[MemoryItem]) -> str:
        fresh = [i for i in items if session.sent.get(i.id) != fingerprint(i)]
        if not fresh:
            return "nothing_new" if items else "nothing_captured"
        try:
            await send_upserts(
                self._publisher,
                self._topics.memory_upserted,
                fresh,
                project=session.project,
                session_id=session.session_id,
                producer=PRODUCER,
            )
        except (KafkaError, RecordTooLarge, TimeoutError) as exc:
            log.warning("capture_publish_failed", project=session.project, session=session.session_id, error=repr(exc))
            return "publish_failed"
        for item in fresh:
            session.sent[item.id] = fingerprint(item)
        log.info(
            "captured",
            project=session.project,
            session=session.session_id,
            items=[(i.id, i.provenance.rule if i.provenance else "") for i in fresh],
        )
        return "published"
