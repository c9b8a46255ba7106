"""Retriever: request -> embed the prompt -> search the request's project -> rank -> completed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from ctxbus.adapters.kafka.runner import Output, PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import RankedItem, RetrievalCompleted, RetrievalRequested, TaskType
from ctxbus.contract.topics import Topics
from ctxbus.core.classify import SessionClassificationCache, TaskClassifier
from ctxbus.core.fingerprint import fingerprint
from ctxbus.core.policy import apply_plan, plan_retrieval, preserve_order
from ctxbus.core.profiles import ContextProfile, InvalidOverride, UnknownProfile, apply_overrides, resolve_profile
from ctxbus.core.ranked_items import to_payload_item
from ctxbus.core.ranking import NO_SIMILARITY_FLOOR, RankedHit, RankingWeights, rank
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchMode, SearchQuery, VectorStore

log = structlog.get_logger("ctxbus.retriever")

SERVICE = "retriever"


def query_text(request: RetrievalRequested) -> str:
    """What is embedded for a request: the prompt, with the domain and mentioned files as hints."""
    parts = [request.prompt.strip()]
    if request.domain:
        parts.append(f"domain: {request.domain}")
    if request.mentioned_files:
        parts.append("files: " + ", ".join(request.mentioned_files[:10]))
    return "\n".join(p for p in parts if p)


def window_notices(embedder: Embedder, text: str) -> tuple[str, ...]:
    """A notice when ``text`` is longer than the embedding model reads (it is embedded truncated)."""
    if len(text) <= embedder.max_tokens:  # a token is at least one character: cannot be over
        return ()
    tokens = embedder.count_tokens(text)
    if tokens <= embedder.max_tokens:
        return ()
    return (
        f"prompt_truncated: the prompt has {tokens} tokens; the embedding reads the first {embedder.max_tokens} "
        "(the keyword search reads all of it)",
    )


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
    ) -> None:
        self._mode = mode
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

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, RetrievalRequested):
            raise PoisonEvent(f"the retriever takes retrieval requests, not {event.event_type}")
        request: RetrievalRequested = event.payload
        try:
            profile = profile_for(request)
        except (UnknownProfile, InvalidOverride) as exc:
            raise PoisonEvent(str(exc)) from exc
        started = time.perf_counter()
        retrieval = Retrieval([], 0, request.task_type, 1.0, ())
        empty_reason: str | None = None
        if not request.prompt.strip():
            empty_reason = "empty_prompt"
        else:
            try:
                retrieval = await asyncio.to_thread(self._retrieve, event.project, event.session_id, request, profile)
            except (OSError, TimeoutError) as exc:
                raise RetriableError(f"vector store unavailable: {exc}") from exc
            if not retrieval.hits:
                empty_reason = "no_memories_in_project" if not retrieval.candidates else "nothing_relevant_enough"
        items: tuple[RankedItem, ...] = tuple(to_payload_item(h) for h in retrieval.hits)
        mix = fingerprint(
            profile,
            retrieval.task_type,
            retrieval.hits,
            mentioned_files=retrieval.mentioned_files,
            task_id=request.task_id,
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
        )
        log.info(
            "retrieved",
            project=event.project,
            items=len(items),
            candidates=retrieval.candidates,
            profile=profile.name,
            task_type=retrieval.task_type,
            fingerprint=mix.hash,
            ms=round(elapsed_ms, 2),
        )
        return [Output(self._topics.retrieval_completed, event.caused(completed, producer=SERVICE))]

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

    def _retrieve(
        self, project: str, session_id: str, request: RetrievalRequested, profile: ContextProfile
    ) -> Retrieval:
        t0 = time.perf_counter()
        text = query_text(request)
        vector = self._embedder.embed_query(text)
        notices = window_notices(self._embedder, text)
        t1 = time.perf_counter()
        task_type, confidence = self._task_type(session_id, request, vector)
        plan = plan_retrieval(
            profile,
            task_type,
            request.prompt,
            request.mentioned_files,
            max_items=request.max_items,
            task_id=request.task_id,
        )
        hits = self._store.search(
            SearchQuery(
                vector=vector,
                project=project,
                text=text,
                mode=self._mode,
                limit=plan.candidate_limit,
                kinds=sorted(plan.include_kinds),
                exclude_kinds=sorted(plan.exclude_kinds),
                min_confidence=request.min_confidence or None,
                min_importance=plan.min_importance or None,
            )
        )
        t2 = time.perf_counter()
        ranked = rank(
            hits,
            domain=request.domain,
            now=self._clock(),
            weights=self._weights,
            min_score=self._min_score,
            min_similarity=self._min_similarity,
            max_items=plan.candidate_limit,
        )
        planned = preserve_order(apply_plan(ranked, plan), plan.preserve_head, plan.preserve_tail)
        t3 = time.perf_counter()
        self._metrics.stage.labels(SERVICE, "embed").observe(t1 - t0)
        self._metrics.stage.labels(SERVICE, "search").observe(t2 - t1)
        self._metrics.stage.labels(SERVICE, "rank").observe(t3 - t2)
        return Retrieval(planned, len(hits), task_type, confidence, plan.mentioned_files, notices)
