"""Retriever: request -> embed the prompt -> search the request's project -> rank -> completed."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.handling import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import RankedItem, RetrievalCompleted, RetrievalRequested, TaskType, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.abstain import (
    EXEMPT_TRIGGERS,
    NOTHING_RELEVANT_ENOUGH,
    Evidence,
    FloorPolicy,
    Relevance,
    applies,
    relevance,
)
from ctxbus.core.classify import SessionClassificationCache, TaskClassifier
from ctxbus.core.context_plan import plan_context
from ctxbus.core.domains import detect_domain
from ctxbus.core.fingerprint import fingerprint
from ctxbus.core.meta_prompts import META_PROMPT, recognise
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import ContextProfile, InvalidOverride, UnknownProfile, apply_overrides, resolve_profile
from ctxbus.core.ranked_items import to_payload_item
from ctxbus.core.ranking import NO_SCORE_FLOOR, NO_SIMILARITY_FLOOR, RankedHit, RankingWeights, rank
from ctxbus.core.task_profiles import (
    SESSION_START_PROFILE,
    TASK_TYPE_PROFILES,
    TaskTypeProfile,
    merge_candidates,
    task_profile_for,
)
from ctxbus.memory.model import GLOBAL_PROJECT
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, QueryBatcher, SearchHit, SearchMode, SearchQuery, VectorStore
from ctxbus.retriever.query import query_text, window_notices

log = structlog.get_logger("ctxbus.retriever")

SERVICE = "retriever"
#: Where a completed event's domain came from.
DOMAIN_FROM_REQUEST = "request"
DOMAIN_DETECTED = "detected"
#: Empty reason of a strict domain that no item of the project (or the global scope) carries.
NO_MEMORIES_IN_DOMAIN = "no_memories_in_domain"


def profile_for(request: RetrievalRequested) -> ContextProfile:
    """The request's context profile (its agent role; seed 004 aliases accepted) with its overrides.

    Raises UnknownProfile (listing the valid names) or InvalidOverride.
    """
    profile = resolve_profile(request.agent_role)
    if not request.profile_overrides:
        return profile
    decoded: dict[str, object] = {}
    for key, raw in request.profile_overrides.items():
        try:
            decoded[key] = json.loads(raw)
        except ValueError as exc:
            raise InvalidOverride(f"profile override {key!r} is not JSON: {raw!r}") from exc
    return apply_overrides(profile, decoded)


@dataclass(frozen=True, slots=True)
class Retrieval:
    hits: list[RankedHit]
    candidates: int
    task_type: TaskType | None
    task_type_confidence: float
    mentioned_files: tuple[str, ...]
    notices: tuple[str, ...] = ()
    domain: str | None = None
    domain_source: str | None = None
    task_profile: TaskTypeProfile | None = None
    #: the relevance floor's verdict (None: not judged) and what the store said about the candidates
    relevance: Relevance | None = None
    evidence: Evidence | None = None


def request_domain(request: RetrievalRequested) -> str | None:
    """The request's own domain, stripped and lower-cased like item domains (None: none given)."""
    return request.domain.strip().lower() or None if request.domain else None


def strict_domain(request: RetrievalRequested) -> str | None:
    """The domain every candidate must carry: the request's, when it asks for a strict domain."""
    return request_domain(request) if request.strict_domain else None


class RetrieverHandler:
    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        topics: Topics,
        metrics: Metrics,
        *,
        weights: RankingWeights | None = None,
        min_score: float = 0.0,
        min_similarity: float = NO_SIMILARITY_FLOOR,
        clock: Callable[[], datetime],
        classifier: TaskClassifier | None = None,
        classifications: SessionClassificationCache | None = None,
        mode: SearchMode = SearchMode.HYBRID,
        collapse: bool = True,
        task_profiles: Mapping[TaskType, TaskTypeProfile] = TASK_TYPE_PROFILES,
        floor: FloorPolicy | None = None,
        skip_meta_prompts: bool = False,
        query_batch: int = 4,
    ) -> None:
        """``query_batch``: the most queries embedded in one model call ahead of their requests (``prepare``)."""
        self._mode = mode
        self._query_batch = max(1, query_batch)
        #: collapse near copies (an injected context); off for search results (see ``searching``)
        self._collapse = collapse
        self._task_profiles = task_profiles
        self._floor = floor
        self._skip_meta_prompts = skip_meta_prompts
        self._embedder = embedder
        self._store = store
        self._topics = topics
        self._metrics = metrics
        self._weights = weights or RankingWeights()
        self._min_score = min_score
        self._min_similarity = min_similarity
        self._clock = clock
        self._classifier = classifier
        self._classifications = classifications or SessionClassificationCache()

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

    def _meta_prompt(self, request: RetrievalRequested) -> str | None:
        """The kind of meta prompt a user's prompt is (task notification, command echo, ...), if it is one."""
        if not self._skip_meta_prompts or request.trigger is not Trigger.USER_PROMPT:
            return None
        kind = recognise(request.prompt)
        return kind.value if kind is not None else None

    def _task_type(
        self, session_id: str, request: RetrievalRequested, vector: list[float]
    ) -> tuple[TaskType | None, float]:
        """The request's task type, else the classifier's (cached per session), else unknown."""
        if request.task_type is not None:
            return request.task_type, 1.0
        if self._classifier is None:
            return None, 0.0
        found = self._classifications.get(session_id, request.prompt)
        if found is None:
            found = self._classifier.classify(request.prompt, vector)
            self._classifications.put(session_id, request.prompt, found)
        return found.task_type, found.confidence

    def _domain(
        self, request: RetrievalRequested, files: Sequence[str], candidates: Sequence[SearchHit]
    ) -> tuple[str | None, str | None]:
        """The request's domain, else one detected from the prompt and files among the candidates' domains."""
        given = request_domain(request)
        if given is not None:
            return given, DOMAIN_FROM_REQUEST
        vocabulary = {d for hit in candidates for d in hit.item.domains}
        detected = detect_domain(request.prompt, files, vocabulary).domain
        return detected, DOMAIN_DETECTED if detected else None

    def _scope_size(self, project: str) -> int:
        """Items a request of ``project`` searches (its own and the global scope): the floor's store size."""
        own = self._store.count(project)
        return own if project == GLOBAL_PROJECT else own + self._store.count(GLOBAL_PROJECT)

    def retrieve(
        self,
        project: str,
        session_id: str,
        request: RetrievalRequested,
        profile: ContextProfile,
        *,
        abstain: bool = True,
    ) -> Retrieval:
        """Embed, search, rank and plan one request (blocking); with ``abstain`` the relevance floor judges it."""
        t0 = time.perf_counter()
        text = query_text(request)
        vector = self._embedder.embed_query(text)
        notices = window_notices(self._embedder, text)
        if request.strict_domain and request_domain(request) is None:
            notices += ("strict_domain_ignored: the request names no domain",)
        t1 = time.perf_counter()
        if request.trigger is Trigger.SESSION_START and request.task_type is None:  # no task yet: the basics
            task_type, confidence, task_profile = None, 0.0, SESSION_START_PROFILE
        else:
            task_type, confidence = self._task_type(session_id, request, vector)
            task_profile = task_profile_for(task_type, self._task_profiles)
        plan = plan_retrieval(
            profile,
            task_type,
            request.prompt,
            request.mentioned_files,
            max_items=request.max_items,
            task_id=request.task_id,
            task_profile=task_profile,
        )
        query = SearchQuery(
            vector=vector,
            project=project,
            text=text,
            mode=self._mode,
            limit=plan.candidate_limit,
            kinds=sorted(plan.include_kinds),
            exclude_kinds=sorted(plan.exclude_kinds),
            domain=strict_domain(request),
            min_confidence=request.min_confidence or None,
            min_importance=plan.min_importance or None,
        )
        hits = self._store.search(query)
        prefetched: list[SearchHit] = []
        if plan.prefetch_kinds:  # the task type's kinds, so other kinds do not crowd them out
            prefetched = self._store.search(replace(query, kinds=sorted(plan.prefetch_kinds)))
        candidates, added = merge_candidates(hits, prefetched)
        t2 = time.perf_counter()
        domain, domain_source = self._domain(request, plan.mentioned_files, candidates)
        now = self._clock()
        ranked = rank(
            candidates,
            domain=domain,
            now=now,
            weights=self._weights,
            # a session start asks for the project's basics, not for what resembles its generic question: no cut (the
            # item cap bounds it; its profile puts the project's rules first)
            min_score=NO_SCORE_FLOOR if request.trigger in EXEMPT_TRIGGERS else self._min_score,
            min_similarity=NO_SIMILARITY_FLOOR if request.trigger in EXEMPT_TRIGGERS else self._min_similarity,
            max_items=max(plan.candidate_limit, len(candidates)),
        )
        # the agent profile, the collapse of near copies (not in search results) and the cap choose the items; the
        # task type orders them (ctxbus.core.context_plan)
        planned = plan_context(
            ranked,
            plan,
            task_profile,
            now=now,
            half_life_days=self._weights.half_life_days,
            prefetched=added,
            collapse=self._collapse,
        )
        # the floor judges what the main search found (what it was calibrated on), not the task prefetch
        floor = self._floor if abstain and self._floor is not None and applies(request.trigger, self._floor) else None
        evidence = Evidence.of(hits, self._scope_size(project) if floor is not None else None)
        verdict = relevance(evidence, floor) if floor is not None else None
        kept = planned
        if verdict is not None:
            if verdict.passes:
                kept = [replace(h, breakdown={**h.breakdown, **verdict.breakdown()}) for h in planned]
            else:
                kept = []
                notices = (*notices, verdict.explain())
                log.info(
                    "abstained",
                    project=project,
                    why=verdict.explain(),
                    dropped=[(h.item.id, round(h.breakdown.get("cosine", 0.0), 3)) for h in planned[:5]],
                )
        t3 = time.perf_counter()
        self._metrics.stage.labels(SERVICE, "embed").observe(t1 - t0)
        self._metrics.stage.labels(SERVICE, "search").observe(t2 - t1)
        self._metrics.stage.labels(SERVICE, "rank").observe(t3 - t2)
        return Retrieval(
            kept,
            len(candidates),
            task_type,
            confidence,
            plan.mentioned_files,
            notices,
            domain,
            domain_source,
            task_profile,
            relevance=verdict,
            evidence=evidence,
        )
