"""Inferred session outcomes: the gateway collects evidence per session and publishes OutcomeRecorded.

**When an outcome is published** (so the learning loop counts every piece of evidence once):

- *PostToolUse / PostToolUseFailure* (Bash): a test, build, type-check or lint run joins the
  session's open **window** of evidence. Nothing is published.
- *Stop* (the turn ends): the transcript lines written since the last read add their check runs and
  the final assistant message to the window (a run already reported by PostToolUse is the same
  evidence, by its tool-use id). When the window decides an outcome (anything but ``unknown``), it
  is published (``source`` ``hook.Stop:<deciding rule>``) and the window closes. A turn without
  evidence publishes nothing: its window stays open and the next turn's evidence joins it.
- *UserPromptSubmit*: explicit feedback on the previous turn ("that worked", "still failing") is
  published at once, before the prompt's retrieval request, so it counts for the items injected up
  to the previous turn and not for this prompt's. It closes the open window (the feedback decides,
  being the latest evidence).

**One outcome per turn.** When the previous turn's outcome was already published (at its Stop), feedback
on it in the next prompt publishes nothing: that turn has its outcome, and the feedback is no evidence
for the new turn either (it is counted as spent, logged ``feedback_after_outcome``). Learning has no
retraction, so a second outcome for the same turn would count its items twice.
- *SessionEnd*: the rest of the transcript and the open window; if they decide, that outcome; if the
  session never published one, ``unknown`` (rule ``no_evidence``), so its items count one use.

Each outcome's event id derives from the session and the keys of the evidence it covers: the same
evidence published twice (a retry, a gateway restarted mid-session re-reading the last turn) is the
same event, which the learning ledger counts once. An outcome whose publishing failed or timed out
(it may still have reached the broker) is kept as it is, same event id and time, and sent again
before anything else at the session's next hook; its evidence never joins another outcome.
Windows live in memory (at most
``MAX_SESSIONS``, least recently used first out); a restarted gateway reads the last turn back from
the transcript at the next Stop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import Outcome, OutcomeRecorded, OutcomeScope
from ctxbus.contract.topics import Topics
from ctxbus.core.hook_evidence import prompt_evidence, prompt_key, tool_evidence
from ctxbus.core.outcome_rules import Decision, Evidence, decide
from ctxbus.gateway import transcript_file
from ctxbus.gateway.identity import project_of
from ctxbus.hooks.client import session_of

log = structlog.get_logger("ctxbus.gateway.outcomes")

PRODUCER = "gateway"
MAX_SESSIONS = 10_000
#: evidence kept per open window (the oldest goes first)
MAX_WINDOW = 500
#: keys of evidence already in a published outcome, remembered per session (a late duplicate is dropped)
MAX_COUNTED = 2_000
_NAMESPACE = uuid.UUID("3b0c7d4e-5f21-4a8b-9c6d-7e1f2a3b4c5d")
_NOTES_MAX = 10_000


@dataclass
class SessionWindow:
    project: str
    session_id: str
    transcript: str | None = None
    #: bytes of the transcript already read (None: not known, read the last turn)
    cursor: int | None = None
    #: shell calls read whose result was not written yet
    calls: dict[str, str] = field(default_factory=dict)
    #: the open window, in order
    evidence: list[Evidence] = field(default_factory=list)
    #: PostToolUse runs since the last transcript read, in arrival order
    pending: dict[str, Evidence] = field(default_factory=dict)
    published: int = 0
    last_outcome: str | None = None
    #: the session had an answered turn (feedback in the next prompt is about it)
    answered: bool = False
    #: a prompt started a turn that no Stop closed yet
    turn_open: bool = False
    #: the last turn's outcome is published (at its Stop): feedback on it in the next prompt adds none
    turn_decided: bool = False
    prompts: int = 0
    correlation_id: uuid.UUID | None = None
    #: keys of the evidence already in an outcome (most recent last)
    counted: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: an outcome whose publishing failed: sent again, unchanged, before anything else
    unsent: Envelope[OutcomeRecorded] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def outcome_event_id(project: str, session_id: str, keys: tuple[str, ...]) -> uuid.UUID:
    """Same session and same evidence, same event id (the learning ledger counts an event id once)."""
    return uuid.uuid5(_NAMESPACE, "\x1f".join(("outcome", project, session_id, *sorted(keys))))


class OutcomeTracker:
    def __init__(self, topics: Topics, publisher: EventPublisher, *, max_sessions: int = MAX_SESSIONS) -> None:
        self._topics = topics
        self._publisher = publisher
        self._max = max_sessions
        self._windows: OrderedDict[tuple[str, str], SessionWindow] = OrderedDict()

    # -- state ------------------------------------------------------------------------------------------------

    def _window(self, hook_input: dict[str, Any]) -> SessionWindow:
        key = (project_of(hook_input), session_of(hook_input))
        window = self._windows.get(key)
        if window is None:
            window = SessionWindow(*key)
            self._windows[key] = window
            while len(self._windows) > self._max:
                self._windows.popitem(last=False)
        self._windows.move_to_end(key)
        path = transcript_file.usable(hook_input.get("transcript_path"))
        if path is not None and path != window.transcript:
            window.transcript, window.cursor = path, None
        return window

    def sessions(self) -> int:
        return len(self._windows)

    # -- hook events ------------------------------------------------------------------------------------------

    async def session_started(self, hook_input: dict[str, Any]) -> str:
        window = self._window(hook_input)
        async with window.lock:
            if window.cursor is None and window.transcript is not None:  # no file: nothing to hop to a thread for
                window.cursor = await asyncio.to_thread(transcript_file.size_of, window.transcript)
            window.answered = window.answered or bool(window.cursor)
        return "session_started"

    async def tool_result(self, hook_input: dict[str, Any], timeout_s: float) -> str:
        # off the event loop: a test run's output is read whole (up to 120,000 characters), which takes a while
        run = await asyncio.to_thread(tool_evidence, hook_input)
        if run is None:
            return "not_a_check"
        window = self._window(hook_input)
        async with window.lock:
            await self._resend(window, timeout_s)
            window.pending[run.key] = run
            while len(window.pending) > MAX_WINDOW:
                window.pending.pop(next(iter(window.pending)))
        return "evidence_recorded"

    async def prompt(self, hook_input: dict[str, Any], timeout_s: float) -> str:
        """Before the prompt's retrieval: feedback on the previous turn is published now."""
        window = self._window(hook_input)
        async with window.lock:
            resent = await self._resend(window, timeout_s)
            if window.turn_open:  # the previous turn was interrupted: no Stop read its evidence
                await self._absorb(window)
            if window.cursor is None and window.transcript is not None:
                window.cursor = await asyncio.to_thread(transcript_file.size_of, window.transcript)
                window.answered = window.answered or await asyncio.to_thread(
                    transcript_file.has_answer, window.transcript
                )
            window.prompts += 1
            window.turn_open = True
            decided, window.turn_decided = window.turn_decided, False  # a new turn begins
            prompt = hook_input.get("prompt")
            marker = window.cursor if window.cursor is not None else f"n{window.prompts}"
            feedback = None
            if window.answered and isinstance(prompt, str):
                feedback = prompt_evidence(prompt, prompt_key(prompt, marker))
            if feedback is None:
                return "no_feedback"
            if decided:  # one outcome per turn: the previous one has its own already
                self._spend(window, (feedback.key,))
                log.info("feedback_after_outcome", session=window.session_id, previous=window.last_outcome)
                return "turn_has_its_outcome" if resent else "publish_failed"
            window.evidence.append(feedback)
            if not resent:  # the earlier outcome goes first: the feedback waits in the window
                return "publish_failed"
            after = f"; the previous outcome published for this session was {window.last_outcome}"
            note = "the user's next prompt, about the previous turn" + (after if window.last_outcome else "")
            return await self._publish(window, decide(window.evidence), "UserPromptSubmit", timeout_s, note)

    def turn_started(self, hook_input: dict[str, Any], correlation_id: uuid.UUID) -> None:
        """The prompt's retrieval request: the turn's outcome carries its correlation id."""
        self._window(hook_input).correlation_id = correlation_id

    async def stop(self, hook_input: dict[str, Any], timeout_s: float) -> str:
        window = self._window(hook_input)
        async with window.lock:
            if not await self._resend(window, timeout_s):
                return "publish_failed"
            await self._absorb(window)
            window.turn_open, window.answered = False, True
            decision = decide(window.evidence)
            if decision.outcome is Outcome.UNKNOWN:
                return "no_evidence"
            window.turn_decided = True
            return await self._publish(window, decision, "Stop", timeout_s)

    async def session_end(self, hook_input: dict[str, Any], timeout_s: float) -> str:
        window = self._window(hook_input)
        reason = hook_input.get("reason") if isinstance(hook_input.get("reason"), str) else None
        note = f"reason: {reason}" if reason else None
        async with window.lock:
            if not await self._resend(window, timeout_s):
                return "publish_failed"
            await self._absorb(window)
            decision = decide(window.evidence)
            result = "no_evidence"
            if decision.outcome is not Outcome.UNKNOWN or window.published == 0:
                result = await self._publish(window, decision, "SessionEnd", timeout_s, note)
            if result != "publish_failed":
                self._windows.pop((window.project, window.session_id), None)
            return result

    # -- internals --------------------------------------------------------------------------------------------

    async def _absorb(self, window: SessionWindow) -> None:
        """The transcript lines since the last read join the window, in the order they were written; runs
        PostToolUse reported and the transcript does not hold (yet) follow them."""
        read = (
            await asyncio.to_thread(transcript_file.read_since, window.transcript, window.cursor, window.calls)
            if window.transcript is not None
            else None  # no file to read (read_since would answer None): no thread hop on the prompt's path
        )
        known = {e.key for e in window.evidence} | set(window.counted)
        if read is not None:
            window.cursor = read.cursor
            fresh = [e for e in read.evidence if e.key not in known]
            known |= {e.key for e in fresh}
            window.evidence.extend(fresh)
        window.evidence.extend(e for k, e in window.pending.items() if k not in known)
        window.pending.clear()
        del window.evidence[:-MAX_WINDOW]

    @staticmethod
    def _spend(window: SessionWindow, keys: tuple[str, ...]) -> None:
        """Evidence that is never to join an outcome again (it is in one, or its turn has one)."""
        window.counted.update(dict.fromkeys(keys))
        while len(window.counted) > MAX_COUNTED:
            window.counted.popitem(last=False)

    async def _send(self, envelope: Envelope[OutcomeRecorded], timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._publisher.publish(self._topics.outcome_recorded, envelope), timeout_s)
        except (TimeoutError, KafkaError) as exc:
            log.warning(
                "outcome_publish_failed", session=envelope.session_id, event_id=str(envelope.event_id), error=repr(exc)
            )
            return False
        return True

    async def _resend(self, window: SessionWindow, timeout_s: float) -> bool:
        """The outcome that failed to go out, sent again as it was; whether none is left waiting."""
        if window.unsent is None:
            return True
        if not await self._send(window.unsent, timeout_s):
            return False
        log.info("outcome_resent", session=window.session_id, event_id=str(window.unsent.event_id))
        window.unsent = None
        return True

    async def _publish(
        self, window: SessionWindow, decision: Decision, event: str, timeout_s: float, note: str | None = None
    ) -> str:
        notes = decision.notes if note is None else f"{decision.notes}. {note}"
        payload = OutcomeRecorded(
            scope=OutcomeScope.SESSION,
            outcome=decision.outcome,
            notes=notes[:_NOTES_MAX],
            source=f"hook.{event}:{decision.rules[0]}"[:200],
        )
        envelope = Envelope.root(
            payload,
            project=window.project,
            session_id=window.session_id,
            producer=PRODUCER,
            event_id=outcome_event_id(window.project, window.session_id, decision.keys),
            correlation_id=window.correlation_id,
        )
        started = time.perf_counter()
        sent = await self._send(envelope, timeout_s)
        # the evidence is this outcome's from now on, sent or not: it never joins another one
        self._spend(window, decision.keys)
        window.evidence.clear()
        window.published += 1
        window.last_outcome = f"{decision.outcome.value} ({decision.rules[0]})"
        if not sent:
            window.unsent = envelope
            return "publish_failed"
        log.info(
            "outcome_published",
            project=window.project,
            session=window.session_id,
            outcome=decision.outcome.value,
            rules=list(decision.rules),
            event_id=str(envelope.event_id),
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return "outcome_published"
