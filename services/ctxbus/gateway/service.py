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
import json
import time
from pathlib import Path
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import ReplyRouter
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import OutcomeRecorded
from ctxbus.contract.topics import Topics
from ctxbus.core.hook_evidence import TOOL_EVENTS
from ctxbus.gateway.http import HttpError, Request, Response
from ctxbus.gateway.library import LibraryRoutes
from ctxbus.gateway.outcomes import OutcomeTracker
from ctxbus.gateway.pattern_sync import PatternSync
from ctxbus.hooks import fallback
from ctxbus.hooks.project import project_for
from ctxbus.hooks.requests import CONTEXT_EVENTS, OUTCOME_EVENTS, HookInputError, hook_output, request_for, session_of
from ctxbus.observability import Metrics
from ctxbus.settings import HookSettings

log = structlog.get_logger("ctxbus.gateway")

SERVICE = "gateway"
TIMEOUT_HEADER = "x-ctxbus-timeout-ms"
#: the lean client names the event it runs for, in case the input does not
EVENT_HEADER = "x-ctxbus-hook-event"
#: part of a hook's budget kept for the file fallback and the way back
FALLBACK_RESERVE_S = 0.3
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
    ) -> None:
        self._library = library
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
        if request.path != "/v1/hooks":
            raise HttpError(404, f"no route {request.path}")
        if request.method != "POST":
            raise HttpError(405, "POST hook input JSON to /v1/hooks")
        try:
            hook_input = json.loads(request.body or b"null")
        except ValueError as exc:
            raise HttpError(400, f"hook input is not JSON: {exc}") from exc
        except RecursionError:
            raise HttpError(400, "hook input is not JSON: nested too deeply") from None
        if not isinstance(hook_input, dict):
            raise HttpError(400, "hook input must be a JSON object")
        event = hook_input.get("hook_event_name") or request.headers.get(EVENT_HEADER)
        if not isinstance(event, str) or not event:
            raise HttpError(400, "hook input has no hook_event_name")
        hook_input["hook_event_name"] = event
        started = time.perf_counter()
        outcome = "disabled"
        body: dict[str, Any] = hook_output(event, "", self._settings.max_chars)
        if self._settings.enabled:
            budget_s = self._budget(request)
            if event in CONTEXT_EVENTS:
                await self._before_context(event, hook_input, budget_s)
                body, outcome = await self._context(event, hook_input, budget_s)
            elif event in OUTCOME_EVENTS:
                outcome = await self._outcome(event, hook_input, budget_s)
            elif event in TOOL_EVENTS and self._outcomes is not None:
                outcome = await self._outcomes.tool_result(hook_input, budget_s)
            else:
                outcome = "ignored"
        self._metrics.gateway_requests.labels(event, outcome).inc()
        self._metrics.gateway_seconds.labels(event).observe(time.perf_counter() - started)
        return Response(200, body)

    def _budget(self, request: Request) -> float:
        try:
            ms = int(request.headers.get(TIMEOUT_HEADER, self._settings.timeout_ms))
        except ValueError:
            ms = self._settings.timeout_ms
        return max(0.05, min(ms, self._settings.timeout_ms) / 1000.0 - FALLBACK_RESERVE_S)

    async def _context(self, event: str, hook_input: dict[str, Any], budget_s: float) -> tuple[dict[str, Any], str]:
        cwd = hook_input.get("cwd") if isinstance(hook_input.get("cwd"), str) else None
        project = project_for(cwd)
        if self._patterns is not None and event == "SessionStart":  # the project's pattern file feeds the store
            budget_s = await self._patterns.at_session_start(cwd, project, budget_s)
        try:
            payload = request_for(hook_input, self._settings)
        except (HookInputError, ValueError) as exc:
            log.warning("hook_input_unusable", hook_event=event, error=str(exc))
            return hook_output(event, "", self._settings.max_chars), "bad_input"
        request = Envelope.root(payload, project=project, session_id=session_of(hook_input), producer=SERVICE)
        if self._outcomes is not None and event == "UserPromptSubmit":
            self._outcomes.turn_started(hook_input, request.correlation_id)
        self._router.expect(request.correlation_id)
        try:
            await asyncio.wait_for(self._publisher.publish(self._topics.retrieval_requested, request), budget_s)
            injected = await self._router.wait(request.correlation_id, budget_s)
        except TimeoutError:
            log.warning("hook_timeout", project=project, correlation_id=str(request.correlation_id))
            return hook_output(event, self._file_fallback(cwd), self._settings.max_chars), "timeout_fallback"
        except KafkaError as exc:
            log.warning("hook_bus_error", project=project, error=repr(exc))
            return hook_output(event, self._file_fallback(cwd), self._settings.max_chars), "bus_error_fallback"
        except RecordTooLarge as exc:  # not sent: the pattern file answers at once
            log.warning("hook_request_too_large", project=project, bytes=exc.size, limit=exc.limit)
            return hook_output(event, self._file_fallback(cwd), self._settings.max_chars), "oversize_fallback"
        finally:
            self._router.forget(request.correlation_id)
        context = injected.payload.context
        if not context and self._patterns is not None and event == "SessionStart":  # not in the store (yet)
            context = self._file_fallback(cwd)
        log.info(
            "hook_answered",
            project=project,
            items=len(injected.payload.item_ids),
            chars=len(context),
            empty_reason=injected.payload.empty_reason,
            correlation_id=str(request.correlation_id),
        )
        return hook_output(event, context, self._settings.max_chars), "injected" if context else "empty"

    def _file_fallback(self, cwd: str | None) -> str:
        # the confidence floor of the retrieval does not apply to pattern files unless set explicitly
        explicit = "min_confidence" in self._settings.model_fields_set
        return fallback.context_for_cwd(
            cwd,
            max_patterns=self._settings.max_patterns,
            min_confidence=self._settings.min_confidence if explicit else None,
            patterns_file=self._settings.patterns_file,
            home=Path.home(),
        )

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
        if self._outcomes is not None:
            if event == "Stop":
                return await self._outcomes.stop(hook_input, budget_s)
            return await self._outcomes.session_end(hook_input, budget_s)
        if event == "Stop":
            return "ignored"
        # inference off: the session's end still counts as one use of what was injected
        cwd = hook_input.get("cwd") if isinstance(hook_input.get("cwd"), str) else None
        reason = hook_input.get("reason") if isinstance(hook_input.get("reason"), str) else None
        notes = "no_evidence: outcome inference is off (CTXBUS_HOOK_OUTCOMES=false)" + (
            f". reason: {reason}" if reason else ""
        )
        payload = OutcomeRecorded(source=f"hook.{event}:no_evidence", notes=notes)
        outcome = Envelope.root(payload, project=project_for(cwd), session_id=session_of(hook_input), producer=SERVICE)
        await self._publisher.publish(self._topics.outcome_recorded, outcome)
        return "outcome_published"
