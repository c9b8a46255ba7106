"""Retriever: request -> embed the prompt -> search the request's project -> rank -> completed.

The retrieval itself (blocking) is ``retriever.retrieval.Retriever``; the handler is its side of the bus: the
completed event, the queries of the next requests embedded together, a query warmed ahead of its request.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Sequence

from ctxbus.adapters.kafka.handling import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import RankedItem, RetrievalCompleted, RetrievalRequested
from ctxbus.core.abstain import NOTHING_RELEVANT_ENOUGH
from ctxbus.core.fingerprint import fingerprint
from ctxbus.core.meta_prompts import META_PROMPT
from ctxbus.core.profiles import InvalidOverride, UnknownProfile
from ctxbus.core.ranked_items import to_payload_item
from ctxbus.ports import QueryBatcher
from ctxbus.retriever.query import query_text
from ctxbus.retriever.request_scope import DOMAIN_FROM_REQUEST, profile_for, request_domain, strict_domain
from ctxbus.retriever.retrieval import SERVICE, Retrieval, Retriever, log

#: Empty reason of a strict domain that no item of the project (or the global scope) carries.
NO_MEMORIES_IN_DOMAIN = "no_memories_in_domain"


class RetrieverHandler(Retriever):
    def forget_session(self, session_id: str) -> int:
        """Forget the task types classified for an ended session (the gateway calls it at SessionEnd): its prompts
        will not come again, and its entries would crowd live sessions out of the bounded cache; how many."""
        return self._classifications.forget_session(session_id)

    def searching(self) -> RetrieverHandler:
        """This retriever for search results (``Memory.search``): every near copy is listed, none collapsed."""
        twin = copy.copy(self)
        twin._collapse = False
        return twin

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        return [Output(self._topics.retrieval_completed, await self.complete(event))]

    def _embeds(self, event: AnyEnvelope) -> str | None:
        """The text ``complete`` will embed for an event (None: it embeds nothing for it)."""
        return self._query_of(event.payload) if isinstance(event.payload, RetrievalRequested) else None

    def _query_of(self, request: RetrievalRequested) -> str | None:
        """The text ``complete`` will embed for a request (None: an empty or meta prompt, nothing embedded)."""
        if not request.prompt.strip() or self._meta_prompt(request) is not None:
            return None
        return query_text(request)

    def warm(self, request: RetrievalRequested) -> None:
        """Embed the query ``complete`` will embed for ``request`` now, ahead of it (blocking; nothing for a prompt it
        embeds nothing for): with the remembering embedder of the retriever, the request finds its vector done or
        under way when it arrives (the gateway calls this while the request crosses the bus)."""
        text = self._query_of(request)
        if text is not None:
            self._embedder.embed_query(text)

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> int:
        """Embed the next requests' queries together (one model call, at most ``query_batch`` of them) before each
        is searched and ranked on its own (``complete`` finds its vector remembered); how many requests that
        covers. A lone query is left to ``complete`` (no batch, no extra thread hop)."""
        if not isinstance(self._embedder, QueryBatcher):
            return len(batch)
        texts: list[str] = []
        taken = 0
        for event, _ in batch:
            text = self._embeds(event)
            if text is not None:
                if len(texts) == self._query_batch:
                    break
                texts.append(text)
            taken += 1
        if len(texts) > 1:
            started = time.perf_counter()
            await asyncio.to_thread(self._embedder.embed_queries, texts)
            self._metrics.stage.labels(SERVICE, "embed_batch").observe(time.perf_counter() - started)
        return taken

    async def complete(self, event: AnyEnvelope, *, abstain: bool = True) -> Envelope[RetrievalCompleted]:
        """The completed event for a request; ``abstain=False`` skips the relevance floor and meta-prompt
        recognition (ranked search shows the ranking as it is; injection abstains)."""
        if not isinstance(event.payload, RetrievalRequested):
            raise PoisonEvent(f"the retriever takes retrieval requests, not {event.event_type}")
        request: RetrievalRequested = event.payload
        try:
            profile = profile_for(request)
        except (UnknownProfile, InvalidOverride) as exc:
            raise PoisonEvent(str(exc)) from exc
        started = time.perf_counter()
        given = request_domain(request)
        retrieval = Retrieval(
            [], 0, request.task_type, 1.0, (), domain=given, domain_source=DOMAIN_FROM_REQUEST if given else None
        )
        empty_reason: str | None = None
        meta = self._meta_prompt(request) if abstain else None
        if not request.prompt.strip():
            empty_reason = "empty_prompt"
        elif meta is not None:  # not a task: no embedding, no search
            empty_reason = META_PROMPT
            retrieval = Retrieval([], 0, request.task_type, 1.0, (), (f"{META_PROMPT}: {meta}",))
        else:
            try:
                retrieval = await asyncio.to_thread(
                    self.retrieve, event.project, event.session_id, request, profile, abstain=abstain
                )
            except (OSError, TimeoutError) as exc:
                raise RetriableError(f"vector store unavailable: {exc}") from exc
            if not retrieval.hits:
                empty_reason = "no_memories_in_project" if not retrieval.candidates else NOTHING_RELEVANT_ENOUGH
                if not retrieval.candidates and strict_domain(request):
                    empty_reason = NO_MEMORIES_IN_DOMAIN
        items: tuple[RankedItem, ...] = tuple(to_payload_item(h) for h in retrieval.hits)
        mix = fingerprint(
            profile,
            retrieval.task_type,
            retrieval.hits,
            mentioned_files=retrieval.mentioned_files,
            task_id=request.task_id,
            domain=retrieval.domain,
            domain_source=retrieval.domain_source,
            strict_domain=strict_domain(request) is not None,
            task_profile=retrieval.task_profile,
        )
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        completed = RetrievalCompleted(
            request=request,
            request_emitted_at=event.emitted_at,
            items=items,
            candidates_considered=retrieval.candidates,
            retrieval_duration_ms=round(elapsed_ms, 3),
            embedding_model=self._embedder.model_id,
            empty_reason=empty_reason,
            profile=profile.name,
            task_type=retrieval.task_type,
            task_type_confidence=round(retrieval.task_type_confidence, 4),
            fingerprint=mix.hash,
            fingerprint_components={k: json.dumps(v, sort_keys=True, default=str) for k, v in mix.components.items()},
            notices=retrieval.notices,
            domain=retrieval.domain,
            domain_source=retrieval.domain_source,
        )
        log.info(
            "retrieved",
            project=event.project,
            items=len(items),
            candidates=retrieval.candidates,
            profile=profile.name,
            task_type=retrieval.task_type,
            domain=retrieval.domain,
            fingerprint=mix.hash,
            empty_reason=empty_reason,
            relevance=round(retrieval.relevance.score, 4) if retrieval.relevance else None,
            ms=round(elapsed_ms, 2),
        )
        return event.caused(completed, producer=SERVICE)
