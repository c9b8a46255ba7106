"""Hook gateway: Claude Code hook input in, hook output out, over warm Kafka connections.

``POST /v1/hooks`` takes Claude Code's hook input as is (so Claude Code's ``http``
hook type can call it directly); the lean ``ctxbus hook ...`` client posts the
same. Context events publish a retrieval request and wait for its injection.
PostToolUse, Stop, SessionEnd and the next prompt feed the outcome inference
(:mod:`ctxbus.gateway.outcomes`), which publishes OutcomeRecorded. When the
pipeline does not answer in time, the answer is the project's learned-pattern
file (seed 002), never nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import ReplyRouter
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, OutcomeRecorded, RetrievalRequested
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import EXPIRED, with_deadline
from ctxbus.core.hook_evidence import TOOL_EVENTS
from ctxbus.gateway.capture import SessionCapture
from ctxbus.gateway.deadline import HookWait
from ctxbus.gateway.hook_input import clean_strings, event_of, parse_object
from ctxbus.gateway.http import HttpError, Request, Response
from ctxbus.gateway.identity import NO_CWD, identify, project_of, resolved
from ctxbus.gateway.library import LibraryRoutes
from ctxbus.gateway.memory_routes import MemoryRoutes
from ctxbus.gateway.outcomes import OutcomeTracker
from ctxbus.gateway.pattern_sync import PatternSync
from ctxbus.hooks import fallback, spool
from ctxbus.hooks.client import session_of
from ctxbus.hooks.requests import CONTEXT_EVENTS, OUTCOME_EVENTS, HookInputError, hook_output, request_for
from ctxbus.observability import Metrics
from ctxbus.redact.default import redact_strings
from ctxbus.settings import HookSettings

log = structlog.get_logger("ctxbus.gateway")

SERVICE = "gateway"
TIMEOUT_HEADER = "x-ctxbus-timeout-ms"
#: the lean client names the event it runs for, in case the input does not
EVENT_HEADER = "x-ctxbus-hook-event"
#: part of a hook's budget kept for the file fallback and the way back
FALLBACK_RESERVE_S = 0.3
#: hook input fields that are paths or ids, never redacted (a path that looks like a secret is still the path)
HOOK_FIELDS_KEPT = frozenset(
    {"session_id", "transcript_path", "cwd", "hook_event_name", "tool_use_id", "file_path", "notebook_path", "path"}
)
#: at most this long for publishing a prompt's feedback outcome before its retrieval request goes out
FEEDBACK_PUBLISH_S = 0.25


class HookGateway:
    def __init__(
        self,
        settings: HookSettings,
        topics: Topics,
        publisher: EventPublisher,
        router: ReplyRouter,
        metrics: Metrics,
        library: LibraryRoutes | None = None,
        outcomes: OutcomeTracker | None = None,
        patterns: PatternSync | None = None,
        warm: Callable[[RetrievalRequested], None] | None = None,
        memory: MemoryRoutes | None = None,
        capture: SessionCapture | None = None,
        data_dir: Path | None = None,
        on_spooled: Callable[[], None] | None = None,
        session_ended: Callable[[str], None] | None = None,
        on_arrival: Callable[[], None] | None = None,
    ) -> None:
        """``warm``: embeds a request's query ahead of the retriever (blocking; run in a worker thread while the
        request is published and crosses the bus), when the retriever runs in this process. ``data_dir``: where
        a fallback answer is spooled for the bus (``ctxbus.hooks.spool``; None: not recorded), ``on_spooled``
        tells the shipper one was. ``session_ended``: told a SessionEnd's session (the retriever of this process
        forgets its task classifications). ``on_arrival``: called as soon as a hook that asks for context has
        arrived, before its request is built (the embedded broker's doorbell rings the request path awake: the
        sleeping consumers are fetching again by the time the request is on the bus)."""
        self._on_arrival = on_arrival
        self._session_ended = session_ended
        self._data_dir = data_dir
        self._on_spooled = on_spooled
        self._warm = warm
        #: session capture, handed the hook input once its answer is written (None: CTXBUS_CAPTURE=off)
        self._capture = capture
        self._warming: set[asyncio.Task[None]] = set()
        self._library = library
        self._memory = memory
        #: the outcome inference (None when CTXBUS_HOOK_OUTCOMES=false)
        self._outcomes = outcomes
        self._patterns = patterns
        self._settings = settings
        self._topics = topics
        self._publisher = publisher
        self._router = router
        self._metrics = metrics

    async def handle(self, request: Request) -> Response:
        if request.path == "/healthz":
            return Response(200, {"status": "ok"})
        if self._library is not None and request.path == "/v1/search":
            return await self._library.search(request)
        if self._library is not None and request.path == "/v1/prime":
            return await self._library.prime(request)
        if self._library is not None and request.path == "/v1/count":
            return await self._library.count(request)
        if self._memory is not None and request.path == "/v1/memory/list":
            return await self._memory.list(request)
        if self._memory is not None and request.path == "/v1/memory/show":
            return await self._memory.show(request)
        if self._memory is not None and request.path == "/v1/memory/sessions":
            return await self._memory.sessions(request)
        if request.path != "/v1/hooks":
            raise HttpError(404, f"no route {request.path}")
        if request.method != "POST":
            raise HttpError(405, "POST hook input JSON to /v1/hooks")
        arrived = time.perf_counter()
        hook_input = parse_object(request.body, "hook input")
        self._arrived(hook_input, request)
        clean_strings(hook_input)  # a lone surrogate is replaced, never the reason for an empty context
        # the first door: no secret or <private> span goes further (docs/privacy.md); paths and ids stay as they are
        redact_strings(hook_input, HOOK_FIELDS_KEPT)
        event = event_of(hook_input, request.headers.get(EVENT_HEADER))
        if event is None:
            raise HttpError(400, "hook input has no hook_event_name")
        hook_input["hook_event_name"] = event
        identity = identify(hook_input, request.headers)
        resolved(hook_input, identity)
        started = time.perf_counter()
        outcome = "disabled"
        body: dict[str, Any] = hook_output(event, "", self._settings.max_chars)
        if self._settings.enabled and identity.project is None:
            # nothing says whose hook this is: never the gateway's own directory or environment
            log.warning("hook_without_cwd", hook_event=event, reason="the hook input has no absolute cwd")
            outcome = NO_CWD
        elif self._settings.enabled:
            budget_s = self._budget(request)
            if event in CONTEXT_EVENTS:
                self._stage("admit", started - arrived)  # parsed, redacted, whose it is
                await self._before_context(event, hook_input, budget_s)
                self._stage("feedback", time.perf_counter() - started)
                left_s = max(0.05, budget_s - (time.perf_counter() - started))  # one budget for the whole call
                body, outcome = await self._context(event, hook_input, left_s)
            elif event in OUTCOME_EVENTS:
                outcome = await self._outcome(event, hook_input, budget_s)
            elif event in TOOL_EVENTS and self._outcomes is not None:
                outcome = await self._outcomes.tool_result(hook_input, budget_s)
            else:
                outcome = "ignored"
        self._metrics.gateway_requests.labels(event, outcome).inc()
        self._metrics.gateway_seconds.labels(event).observe(time.perf_counter() - started)
        capture = self._capture
        if capture is not None and self._settings.enabled and identity.project is not None and capture.wants(event):
            return Response(200, body, after=lambda: capture.after_answer(event, hook_input))
        return Response(200, body)

    def _arrived(self, hook_input: dict[str, Any], request: Request) -> None:
        """``on_arrival`` for a hook that asks for context (never in the hook's way: a failure is logged)."""
        if self._on_arrival is None or not self._settings.enabled:
            return
        if event_of(hook_input, request.headers.get(EVENT_HEADER)) not in CONTEXT_EVENTS:
            return
        try:
            self._on_arrival()
        except Exception as exc:
            log.warning("arrival_ring_failed", error=repr(exc))

    def _stage(self, stage: str, seconds: float) -> None:
        """One part of a context hook's time (``ctxbus_stage_seconds{service="gateway"}``): ``admit`` (parsed,
        redacted, identified), ``feedback`` (the previous turn's outcome published), ``publish`` (the request
        acknowledged by the broker), ``reply`` (until the injection came back)."""
        self._metrics.stage.labels(SERVICE, stage).observe(seconds)

    def _budget(self, request: Request) -> float:
        try:
            ms = int(request.headers.get(TIMEOUT_HEADER, self._settings.timeout_ms))
        except ValueError:
            ms = self._settings.timeout_ms
        return max(0.05, min(ms, self._settings.timeout_ms) / 1000.0 - FALLBACK_RESERVE_S)

    async def _context(self, event: str, hook_input: dict[str, Any], budget_s: float) -> tuple[dict[str, Any], str]:
        cwd = hook_input.get("cwd") if isinstance(hook_input.get("cwd"), str) else None
        project = project_of(hook_input)
        if (
            self._patterns is not None and event == "SessionStart" and cwd is not None
        ):  # its pattern file feeds the store
            budget_s = await self._patterns.at_session_start(cwd, project, budget_s)
        try:
            payload = request_for(hook_input, self._settings)
        except (HookInputError, ValueError) as exc:
            log.warning("hook_input_unusable", hook_event=event, error=str(exc))
            return hook_output(event, "", self._settings.max_chars), "bad_input"
        # the request carries the moment this wait ends (less the answer's way back); one wait, until then
        wait = HookWait.start(budget_s)
        payload = with_deadline(payload, wait.request_deadline)
        request = Envelope.root(payload, project=project, session_id=session_of(hook_input), producer=SERVICE)
        if self._outcomes is not None and event == "UserPromptSubmit":
            self._outcomes.turn_started(hook_input, request.correlation_id)
        self._router.expect(request.correlation_id)
        self._start_warming(payload)
        try:
            publishing = time.perf_counter()
            await asyncio.wait_for(self._publisher.publish(self._topics.retrieval_requested, request), wait.left())
            waiting = time.perf_counter()
            self._stage("publish", waiting - publishing)
            injected = await self._router.wait(request.correlation_id, wait.left())
            self._stage("reply", time.perf_counter() - waiting)
        except TimeoutError:
            log.warning("hook_timeout", project=project, correlation_id=str(request.correlation_id))
            return self._fallback(event, hook_input, request, "timeout_fallback")
        except KafkaError as exc:
            log.warning("hook_bus_error", project=project, error=repr(exc))
            return self._fallback(event, hook_input, request, "bus_error_fallback")
        except RecordTooLarge as exc:  # not sent: the pattern file answers at once
            log.warning("hook_request_too_large", project=project, bytes=exc.size, limit=exc.limit)
            return self._fallback(event, hook_input, request, "oversize_fallback")
        finally:
            self._router.forget(request.correlation_id)
        if injected.payload.empty_reason == EXPIRED:  # the pipeline was too late for it: the pattern file answers
            log.warning("hook_expired", project=project, correlation_id=str(request.correlation_id))
            return self._fallback(event, hook_input, request, "expired_fallback")
        context = injected.payload.context
        if not context and self._patterns is not None and event == "SessionStart":  # not in the store (yet)
            answer, _ = self._fallback(event, hook_input, request, "empty_fallback", cause=injected)
            context = answer["hookSpecificOutput"]["additionalContext"]
        log.info(
            "hook_answered",
            project=project,
            items=len(injected.payload.item_ids),
            chars=len(context),
            empty_reason=injected.payload.empty_reason,
            correlation_id=str(request.correlation_id),
        )
        return hook_output(event, context, self._settings.max_chars), "injected" if context else "empty"

    def _start_warming(self, payload: RetrievalRequested) -> None:
        """The request's query embedded in a worker thread meanwhile (never in the hook's way: a failure is logged)."""
        if self._warm is None:
            return
        task = asyncio.create_task(asyncio.to_thread(self._warm, payload))
        self._warming.add(task)
        task.add_done_callback(self._warmed)

    def _warmed(self, task: asyncio.Task[None]) -> None:
        self._warming.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("query_warm_failed", error=repr(task.exception()))

    def _fallback_threshold(self) -> float | None:
        # the confidence floor of the retrieval does not apply to pattern files unless set explicitly
        explicit = "min_confidence" in self._settings.model_fields_set
        return self._settings.min_confidence if explicit else None

    def _file_answer(self, cwd: str | None) -> fallback.InjectorOutput | None:
        if cwd is None:  # the client named the project but no directory: no pattern file to read
            return None
        return fallback.answer_for_cwd(
            cwd,
            max_patterns=self._settings.max_patterns,
            min_confidence=self._fallback_threshold(),
            patterns_file=self._settings.patterns_file,
            home=Path.home(),
        )

    def _fallback(
        self,
        event: str,
        hook_input: dict[str, Any],
        request: Envelope[RetrievalRequested],
        why: str,
        cause: Envelope[ContextInjected] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """The pattern file's answer to a request the pipeline did not answer (or, ``cause``, answered with an
        empty context), spooled for the bus (``ctxbus.hooks.spool``: the shipper publishes it as
        ``context.injected`` once the bus takes it, in the request's chain: caused by ``cause`` when given, else
        by the request). An empty answer is not spooled when the pipeline's empty one is on the bus already."""
        cwd = hook_input.get("cwd") if isinstance(hook_input.get("cwd"), str) else None
        answer = self._file_answer(cwd)
        context = answer["patterns_context"] if answer is not None else ""
        if self._data_dir is not None and (context or cause is None):
            entry = spool.fallback_record(
                project=request.project,
                session_id=request.session_id,
                hook_event=event,
                source=spool.GATEWAY_FILE,
                why=why,
                context=context[: self._settings.max_chars],
                pattern_count=answer["pattern_count"] if answer is not None else 0,
                retrieval_ms=answer["retrieval_ms"] if answer is not None else 0,
                min_confidence=self._fallback_threshold(),
                correlation_id=str(request.correlation_id),
                causation_id=str(cause.event_id if cause is not None else request.event_id),
            )
            try:
                if spool.record(str(self._data_dir), entry) is None:
                    log.warning("fallback_spool_full", limit=spool.MAX_SPOOLED)
                elif self._on_spooled is not None:
                    self._on_spooled()
            except OSError as exc:  # the hook still gets its answer
                log.warning("fallback_spool_failed", error=repr(exc))
        return hook_output(event, context, self._settings.max_chars), why

    async def _before_context(self, event: str, hook_input: dict[str, Any], budget_s: float) -> None:
        """SessionStart marks where the session's transcript starts; a prompt may carry feedback on the
        previous turn, published before the prompt's own request. Never in the way of the context."""
        if self._outcomes is None:
            return
        try:
            if event == "SessionStart":
                await self._outcomes.session_started(hook_input)
            else:
                await self._outcomes.prompt(hook_input, min(FEEDBACK_PUBLISH_S, budget_s / 4))
        except Exception:  # the prompt still gets its context
            log.exception("outcome_inference_failed", hook_event=event)

    async def _outcome(self, event: str, hook_input: dict[str, Any], budget_s: float) -> str:
        if event == "SessionEnd" and self._session_ended is not None:
            self._session_ended(session_of(hook_input))
        if self._outcomes is not None:
            if event == "Stop":
                return await self._outcomes.stop(hook_input, budget_s)
            return await self._outcomes.session_end(hook_input, budget_s)
        if event == "Stop":
            return "ignored"
        # inference off: the session's end still counts as one use of what was injected
        reason = hook_input.get("reason") if isinstance(hook_input.get("reason"), str) else None
        notes = "no_evidence: outcome inference is off (CTXBUS_HOOK_OUTCOMES=false)" + (
            f". reason: {reason}" if reason else ""
        )
        payload = OutcomeRecorded(source=f"hook.{event}:no_evidence", notes=notes)
        outcome = Envelope.root(
            payload, project=project_of(hook_input), session_id=session_of(hook_input), producer=SERVICE
        )
        await self._publisher.publish(self._topics.outcome_recorded, outcome)
        return "outcome_published"
