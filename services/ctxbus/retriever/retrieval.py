"""One request retrieved, blocking: embed the prompt, classify it, search the request's project, rank, plan the
context and let the relevance floor judge it. ``RetrieverHandler`` puts it on the bus."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from ctxbus.contract.payloads import RetrievalRequested, TaskType, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.abstain import EXEMPT_TRIGGERS, Evidence, FloorPolicy, Relevance, applies, relevance
from ctxbus.core.classify import SessionClassificationCache, TaskClassifier
from ctxbus.core.context_plan import plan_context
from ctxbus.core.domains import detect_domain
from ctxbus.core.meta_prompts import recognise
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import ContextProfile
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
from ctxbus.ports import Embedder, SearchHit, SearchMode, SearchQuery, VectorStore
from ctxbus.retriever.query import query_text, window_notices
from ctxbus.retriever.request_scope import DOMAIN_DETECTED, DOMAIN_FROM_REQUEST, request_domain, strict_domain

log = structlog.get_logger("ctxbus.retriever")

SERVICE = "retriever"


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


class Retriever:
    """Embeds, classifies, searches, ranks and plans one request at a time (blocking); the handler's base."""

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
