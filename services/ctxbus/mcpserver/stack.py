"""What an MCP tool does, on the running stack: every call is an event on the bus, as a hook's call is.

- priming, searching and pre-context publish a retrieval request (``ctxbus.context.retrieval.requested.v1``) and
  wait for its chain's answer, as ``ctxbus request`` does (:func:`ctxbus.adapters.kafka.reply.request_explained`):
  the retriever ranks, the injector assembles (seed 001's document when asked, seed 003's pre-context for a retry,
  fallback or helper trigger), the recorder, the learning consumer, the dashboards and replay see the chain;
- remembering publishes ``memory.upserted`` and waits for the store owner's ``memory.stored`` answer
  (:func:`ctxbus.adapters.kafka.stored_replies.send_upserts`, as ``ctxbus memory import`` does while the stack runs);
- forgetting publishes ``memory.curated`` (:mod:`ctxbus.retriever.curation_record`, as ``ctxbus memory forget``);
- outcomes publish ``context.outcome.recorded`` (:mod:`ctxbus.learning.record`, as ``ctxbus outcome record``).

The resources read the store through the gateway's memory routes (``/v1/memory/list|show``). Nothing here opens
the store: while the stack runs it is the stack's. With no stack (and no configured cluster) every call raises
:class:`StackError` saying how to start one.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_explained
from ctxbus.adapters.kafka.stored_replies import StoredReplies, send_upserts
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import (
    SECTIONS,
    ContextInjected,
    CurationAction,
    RetrievalCompleted,
    RetrievalRequested,
    TaskType,
    Trigger,
)
from ctxbus.contract.topics import Topics
from ctxbus.core.deadlines import deadline_for
from ctxbus.dashboard.memory_view import GatewayError, stack_gateway
from ctxbus.learning import record
from ctxbus.memory.model import MemoryItem
from ctxbus.retriever import curation_record
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

#: the producer and agent name of every event an MCP tool publishes
PRODUCER = "mcp"
#: seconds a tool waits for the pipeline's answer by default
DEFAULT_TIMEOUT_S = 30.0
#: pre-context kinds (seed 003) -> the request's trigger
PRECONTEXT_TRIGGERS = {"retry": Trigger.RETRY, "fallback": Trigger.FALLBACK, "helper": Trigger.HELPER}
#: most items one resource shows
MAX_RESOURCE_ITEMS = 20


class StackError(RuntimeError):
    """A tool call the stack cannot serve: no stack running, the bus out of reach, no answer in time, bad input."""


def item_id_for(project: str, content: str) -> str:
    """A remembered text's id when the caller names none: the same text in the same project is the same item."""
    return "mcp-" + hashlib.sha256(f"{project}\0{content}".encode()).hexdigest()[:16]


class StackClient:
    """The tools' calls; ``session_id``: the MCP session's id, used when a call names none (one per server process,
    so an outcome recorded without a session counts for what this server primed)."""

    def __init__(self, settings: Settings, *, session_id: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.settings = settings
        self.session_id = session_id
        self.timeout_s = timeout_s
        self.topics = Topics(settings.topic_prefix)

    def _bus(self) -> KafkaClientConfig:
        try:
            return kafka_config(self.settings)
        except NoBroker as exc:
            raise StackError(f"the ctxbus stack is not running: {exc}") from exc

    # -- retrieval requests through the pipeline ------------------------------------------------------------

    async def _retrieve(
        self, project: str, payload: RetrievalRequested, session_id: str | None
    ) -> tuple[Envelope[ContextInjected], Envelope[RetrievalCompleted] | None]:
        config = self._bus()
        event = Envelope.root(payload, project=project, session_id=session_id or self.session_id, producer=PRODUCER)
        try:
            return await request_explained(config, self.topics, event, self.timeout_s, client_id=PRODUCER)
        except TimeoutError as exc:
            raise StackError(
                f"no answer from the ctxbus pipeline within {self.timeout_s:g} s (correlation {event.correlation_id}):"
                " is `ctxbus up` running and healthy (`ctxbus status`)?"
            ) from exc
        except (KafkaError, MissingTopic, OSError) as exc:
            raise StackError(f"cannot reach the ctxbus bus at {config.bootstrap_servers}: {exc}") from exc

    def _request(self, prompt: str, **fields: Any) -> RetrievalRequested:
        try:
            return RetrievalRequested(
                agent_name=PRODUCER,
                prompt=prompt,
                deadline=deadline_for(datetime.now(UTC), self.timeout_s),  # read after it: answered "expired"
                **fields,
            )
        except ValueError as exc:
            raise StackError(f"invalid request: {exc}") from exc

    async def prime(
        self,
        project: str,
        task_type: str,
        *,
        domain: str | None = None,
        description: str | None = None,
        include: Mapping[str, bool] | None = None,
        max_tokens: int = 2_000,
        max_items: int = 10,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Seed 001's prime_context document (as :meth:`ctxbus.api.Memory.prime` returns it, built by the injector),
        with the injected ``context`` and the chain's ``correlation_id``."""
        unknown = sorted(set(include or {}) - set(SECTIONS))
        if unknown:
            raise StackError(f"unknown include section(s) {', '.join(unknown)}; valid: {', '.join(SECTIONS)}")
        if task_type not in {t.value for t in TaskType}:
            raise StackError(f"unknown task_type {task_type!r}; valid: {', '.join(t.value for t in TaskType)}")
        # no description: the seed's own query for a task type and a domain
        query = description.strip() if description and description.strip() else f"{domain or ''} {task_type}".strip()
        payload = self._request(
            query,
            task_type=TaskType(task_type),
            domain=domain,
            include=dict(include or {}),
            prime=True,
            max_tokens=max_tokens,
            max_items=max_items,
            trigger=Trigger.USER_PROMPT,
        )
        injected, _ = await self._retrieve(project, payload, session_id)
        document: dict[str, Any] = json.loads(injected.payload.prime or "{}")
        document["context"] = injected.payload.context
        if injected.payload.empty_reason:
            document["empty_reason"] = injected.payload.empty_reason
        document["correlation_id"] = str(injected.correlation_id)
        return document

    async def search(
        self,
        project: str,
        query: str,
        *,
        k: int = 10,
        domain: str | None = None,
        task_type: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """The retriever's ranked items for ``query`` (best first, with their score breakdowns), as the pipeline
        ranks them for an injection (the relevance floor applies: an empty list says why in ``empty_reason``)."""
        if not query.strip():
            raise StackError("the query is empty or blank")
        payload = self._request(
            query,
            max_items=k,
            domain=domain,
            task_type=TaskType(task_type) if task_type else None,
            trigger=Trigger.USER_PROMPT,
        )
        injected, completed = await self._retrieve(project, payload, session_id)
        items = [] if completed is None else sorted(completed.payload.items, key=lambda i: (-i.score, i.id))
        found = [
            {
                "id": i.id,
                "project": i.project,
                "kind": i.kind,
                "score": round(i.score, 6),
                "title": i.title,
                "content": i.content,
                "breakdown": dict(i.breakdown),
            }
            for i in items
        ]
        if completed is None:  # the injection names its items even when the completed event came too late
            found = [{"id": i} for i in injected.payload.item_ids]
        return {
            "query": query,
            "items": found,
            "empty_reason": injected.payload.empty_reason,
            "task_type": completed.payload.task_type.value if completed and completed.payload.task_type else None,
            "domain": completed.payload.domain if completed else None,
            "correlation_id": str(injected.correlation_id),
        }

    async def precontext(
        self,
        project: str,
        task_id: str,
        *,
        kind: str = "retry",
        description: str | None = None,
        failed_provider: str | None = None,
        failure_reason: str | None = None,
        max_items: int = 5,
    ) -> dict[str, Any]:
        """Seed 003's pre-context for the task's next attempt (from the attempts recorded for it; none once an outcome
        ended the task), first in the injected context, then what memory holds for ``description``."""
        trigger = PRECONTEXT_TRIGGERS.get(kind)
        if trigger is None:
            raise StackError(f"unknown pre-context kind {kind!r}; valid: {', '.join(PRECONTEXT_TRIGGERS)}")
        payload = self._request(
            description.strip() if description and description.strip() else f"task {task_id}",
            task_id=task_id,
            trigger=trigger,
            failed_provider=failed_provider,
            failure_reason=failure_reason,
            max_items=max_items,
        )
        injected, _ = await self._retrieve(project, payload, task_id)
        p = injected.payload
        return {
            "task_id": task_id,
            "kind": kind,
            "context": p.context,
            "context_source": p.context_source.value,
            "item_ids": list(p.item_ids),
            "empty_reason": p.empty_reason,
            "correlation_id": str(injected.correlation_id),
        }

    # -- memory, curation and outcomes on the bus -----------------------------------------------------------

    async def remember(self, item: MemoryItem) -> dict[str, Any]:
        """Publish the item to the store's owner and wait for its answer (stored, merged or refused)."""
        config = self._bus()
        try:
            async with (
                EventPublisher(config, PRODUCER, schemas_topic=self.topics.schemas) as publisher,
                StoredReplies(config, self.topics.memory_stored) as replies,
            ):
                (event,) = await send_upserts(
                    publisher,
                    self.topics.memory_upserted,
                    [item],
                    project=item.project,
                    session_id=self.session_id,
                    producer=PRODUCER,
                    replies=replies,
                )
                answered = await replies.wait(self.timeout_s)
        except (KafkaError, MissingTopic, OSError) as exc:
            raise StackError(f"cannot reach the ctxbus bus at {config.bootstrap_servers}: {exc}") from exc
        answer = replies.answers.get(str(event.event_id))
        results = [r.model_dump(mode="json") for r in answer.payload.results] if answer is not None else []
        done: dict[str, Any] = {
            "id": item.id,
            "project": item.project,
            "event_id": str(event.event_id),
            "stored": answered,
            "results": results,
        }
        if not answered:
            done["note"] = (
                f"the store's owner did not answer within {self.timeout_s:g} s: the item is on the bus and lands when "
                "the stack catches up (`ctxbus status`)"
            )
        return done

    async def forget(self, project: str, ids: Sequence[str], *, note: str | None = None) -> dict[str, Any]:
        try:
            event = curation_record.curation_event(project, CurationAction.FORGET, ids, note=note, source=PRODUCER)
            await curation_record.publish(self._bus(), self.topics, event, PRODUCER)  # bad input first, then the bus
        except curation_record.CurationError as exc:
            raise StackError(str(exc)) from exc
        return {"event_id": str(event.event_id), "project": event.project, "forgotten": list(event.payload.ids)}

    async def record_outcome(
        self,
        project: str,
        outcome: str,
        *,
        session_id: str | None = None,
        task_id: str | None = None,
        notes: str | None = None,
    ) -> dict[str, Any]:
        """An outcome of a task, or of a session (this server's own when neither is named)."""
        session = session_id or (None if task_id else self.session_id)
        try:
            event = record.outcome_event(
                project, outcome, session_id=session, task_id=task_id, notes=notes, source=PRODUCER
            )
            await record.publish(self._bus(), self.topics, event, PRODUCER)  # bad input first, then the bus
        except record.OutcomeError as exc:
            raise StackError(str(exc)) from exc
        return asdict(record.receipt(event, "bus"))

    # -- reads for the resources ----------------------------------------------------------------------------

    async def items(self, project: str, kind: str) -> list[dict[str, Any]]:
        """The live items of ``kind`` in ``project`` as whole documents (at most MAX_RESOURCE_ITEMS: the most
        convinced first), read through the gateway."""
        call = stack_gateway(self.settings)
        try:
            rows = (await call("/v1/memory/list", {"project": project, "kind": kind, "stale": False}))["items"]
            rows = sorted(rows, key=lambda r: (-float(r.get("conviction", 0.0)), str(r["id"])))[:MAX_RESOURCE_ITEMS]
            return [await call("/v1/memory/show", {"project": project, "id": r["id"]}) for r in rows]
        except GatewayError as exc:
            raise StackError(str(exc)) from exc


def new_session_id() -> str:
    return f"mcp-{uuid.uuid4().hex[:12]}"
