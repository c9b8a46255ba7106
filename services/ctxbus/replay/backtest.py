"""``ctxbus replay --backtest``: re-run retrieval and assembly for historical requests with another
setting (profile, overrides, ranking weights, budgets, search mode), publishing nothing, and compare
with what was injected.

The real handlers do the work: ``RetrieverHandler`` and ``InjectorHandler`` are callables that take an
envelope and return their outputs (they never publish), so each historical request envelope goes
through them as the services would take it, with the new setting applied to the request
(``agent_role`` for the profile, ``profile_overrides``, budgets) or to the handlers (weights, score
floors, search mode). Recency is computed as of the request's own time, so a month-old request is
ranked as it was then (the store, though, is today's: ``baseline="rerun"`` re-runs the historical
setting too, to tell the new setting's effect from the store's drift). Pre-context (seed 003) is not
rebuilt: the comparison is about memory items.

The historical requests are read back (requested events, or the request a completed event carries)
and decoded with the contract's serde, validated, only for the chains being backtested.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.handling import PoisonEvent, RetriableError
from ctxbus.contract.envelope import AnyEnvelope, Envelope, Producer
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value
from ctxbus.contract.topics import Topics
from ctxbus.core.abstain import FloorPolicy
from ctxbus.core.profiles import InvalidOverride, UnknownProfile, apply_overrides, resolve_profile
from ctxbus.core.ranking import RankingWeights
from ctxbus.core.task_prototypes import build_classifier
from ctxbus.injector.handler import InjectorHandler
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchMode, VectorStore
from ctxbus.replay.compare import BacktestSummary, Injection, RequestComparison, summarise
from ctxbus.replay.join import Chain
from ctxbus.replay.options import Selection
from ctxbus.replay.read import ReadPlan, TopicReader
from ctxbus.retriever.handler import RetrieverHandler
from ctxbus.settings import InjectionSettings

BASELINES = ("history", "rerun")
DEFAULT_LIMIT = 200


class BacktestError(ValueError):
    """A backtest setting that cannot work (unknown profile, bad override, budget out of bounds)."""


@dataclass(frozen=True, slots=True)
class BacktestSettings:
    """The setting to try; None keeps what the request or the services had."""

    profile: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    weights: RankingWeights | None = None
    max_tokens: int | None = None
    max_chars: int | None = None
    max_items: int | None = None
    min_score: float | None = None
    min_similarity: float | None = None
    mode: SearchMode | None = None
    baseline: str = "history"
    limit: int = DEFAULT_LIMIT

    def check(self) -> None:
        """Raises BacktestError when the setting cannot be applied (the message says why)."""
        if self.baseline not in BASELINES:
            raise BacktestError(f"unknown baseline {self.baseline!r}; valid: {', '.join(BASELINES)}")
        if self.limit < 1:
            raise BacktestError("--limit must be at least 1")
        try:
            profile = resolve_profile(self.profile) if self.profile else resolve_profile("implementer")
            apply_overrides(profile, {k: json.loads(v) for k, v in self.overrides.items()})
        except (UnknownProfile, InvalidOverride) as exc:
            raise BacktestError(str(exc)) from exc
        try:
            RetrievalRequested(
                agent_name="check",
                prompt="check",
                trigger=Trigger.USER_PROMPT,
                max_tokens=2_000 if self.max_tokens is None else self.max_tokens,
                max_chars=10_000 if self.max_chars is None else self.max_chars,
                max_items=10 if self.max_items is None else self.max_items,
            )
        except ValueError as exc:
            raise BacktestError(f"budget out of bounds: {exc}") from exc

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"baseline": self.baseline, "limit": self.limit}
        for name in ("profile", "max_tokens", "max_chars", "max_items", "min_score", "min_similarity"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.overrides:
            out["overrides"] = {k: json.loads(v) for k, v in self.overrides.items()}
        if self.weights is not None:
            out["weights"] = self.weights.normalised() | {"half_life_days": self.weights.half_life_days}
        if self.mode is not None:
            out["mode"] = self.mode.value
        return out

    def apply(self, request: RetrievalRequested) -> RetrievalRequested:
        """The historical request with this setting's profile, overrides and budgets."""
        update: dict[str, Any] = {}
        if self.profile:
            update["agent_role"] = self.profile
        if self.overrides:
            update["profile_overrides"] = {**request.profile_overrides, **self.overrides}
        for name in ("max_tokens", "max_chars", "max_items"):
            if getattr(self, name) is not None:
                update[name] = getattr(self, name)
        return request.model_copy(update=update) if update else request


class _AsOf:
    """The handlers' clock: the time of the request being re-run (recency as it was then)."""

    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.moment


def make_retriever(
    embedder: Embedder,
    store: VectorStore,
    topics: Topics,
    clock: Callable[[], datetime],
    *,
    weights: RankingWeights | None,
    min_score: float,
    min_similarity: float,
    mode: SearchMode | None,
    floor: FloorPolicy | None = None,
    skip_meta_prompts: bool = False,
) -> RetrieverHandler:
    """The real retriever, as ``wiring.retriever.retriever_runners`` makes it; the one place to follow its
    constructor."""
    extra: dict[str, Any] = {"mode": mode} if mode is not None else {}
    return RetrieverHandler(
        embedder,
        store,
        topics,
        Metrics(),
        weights=weights,
        min_score=min_score,
        min_similarity=min_similarity,
        clock=clock,
        classifier=build_classifier(embedder),
        floor=floor,
        skip_meta_prompts=skip_meta_prompts,
        **extra,
    )


def make_injector(
    topics: Topics, settings: InjectionSettings, embedder: Embedder, clock: Callable[[], datetime]
) -> InjectorHandler:
    """The real injector without the attempt store (pre-context is not part of the comparison)."""
    return InjectorHandler(topics, Metrics(), settings, clock=clock, count_tokens=embedder.count_tokens)


@dataclass(frozen=True, slots=True)
class Pipeline:
    retriever: RetrieverHandler
    injector: InjectorHandler
    clock: _AsOf

    async def __call__(self, request: Envelope[RetrievalRequested]) -> tuple[RetrievalCompleted, ContextInjected]:
        """Retrieval then assembly for one request envelope; nothing is published."""
        self.clock.moment = request.emitted_at
        (done,) = await self.retriever(request)
        completed = done.event
        if not isinstance(completed.payload, RetrievalCompleted):
            raise PoisonEvent(f"the retriever answered a {completed.event_type}")
        (out,) = await self.injector(completed)
        if not isinstance(out.event.payload, ContextInjected):
            raise PoisonEvent(f"the injector answered a {out.event.event_type}")
        return completed.payload, out.event.payload


def pipelines(
    settings: BacktestSettings,
    *,
    embedder: Embedder,
    store: VectorStore,
    topics: Topics,
    injection: InjectionSettings,
) -> tuple[Pipeline, Pipeline]:
    """(baseline, new): the services' setting, and the one to try."""
    base_clock, new_clock = _AsOf(), _AsOf()
    from ctxbus.components import floor_policy  # noqa: PLC0415

    abstention: dict[str, Any] = {
        "floor": floor_policy(injection),
        "skip_meta_prompts": injection.skip_meta_prompts,
    }
    base = Pipeline(
        make_retriever(
            embedder,
            store,
            topics,
            base_clock,
            weights=None,
            min_score=injection.min_score,
            min_similarity=injection.min_similarity,
            mode=None,
            **abstention,
        ),
        make_injector(topics, injection, embedder, base_clock),
        base_clock,
    )
    budget = {
        k: max(getattr(injection, k), v) for k in ("max_tokens", "max_chars") if (v := getattr(settings, k)) is not None
    }
    try:
        new_injection = injection.model_copy(update=budget) if budget else injection
        InjectionSettings.model_validate(new_injection.model_dump())
    except ValueError as exc:
        raise BacktestError(f"budget out of bounds: {exc}") from exc
    new = Pipeline(
        make_retriever(
            embedder,
            store,
            topics,
            new_clock,
            weights=settings.weights,
            min_score=settings.min_score if settings.min_score is not None else injection.min_score,
            min_similarity=(
                settings.min_similarity if settings.min_similarity is not None else injection.min_similarity
            ),
            mode=settings.mode,
            **abstention,
        ),
        make_injector(topics, new_injection, embedder, new_clock),
        new_clock,
    )
    return base, new


def request_of(event: AnyEnvelope) -> Envelope[RetrievalRequested] | None:
    """A request envelope from a requested event, or rebuilt from a completed event's copy of its request."""
    payload = event.payload
    if isinstance(payload, RetrievalRequested):
        return cast(Envelope[RetrievalRequested], event)
    if isinstance(payload, RetrievalCompleted):
        return Envelope[RetrievalRequested](
            event_id=event.causation_id,
            event_type="context.retrieval.requested",
            schema_version=1,
            entity_id=event.entity_id,
            session_id=event.session_id,
            correlation_id=event.correlation_id,
            causation_id=event.causation_id,
            emitted_at=payload.request_emitted_at,
            producer=Producer(service="replay"),
            project=event.project,
            payload=payload.request,
        )
    return None


#: How much earlier than the window a request may have been made and still be found for an injection in it.
REQUEST_SLACK_MS = 5 * 60 * 1000


def request_window(selection: Selection) -> Selection:
    """Where the requests of the chains in ``selection`` are: its time window, opened a little earlier
    (a request precedes its injection), on every offset (the topics to read are not the ones replayed)."""
    since = selection.since_ms - REQUEST_SLACK_MS if selection.since_ms is not None else None
    return Selection(since_ms=since, until_ms=selection.until_ms)


async def historical_requests(
    config: KafkaClientConfig, topics: Topics, selection: Selection, wanted: set[str]
) -> dict[str, Envelope[RetrievalRequested]]:
    """The request envelopes of the ``wanted`` correlation ids, from the requested topic (or the copy a
    completed event carries), within ``selection``, decoded and validated by the serde."""
    names = [topics.retrieval_requested, topics.retrieval_completed]
    deserialize = EventDeserializer()
    found: dict[str, Envelope[RetrievalRequested]] = {}
    async with TopicReader(config, dead_letter_topic=topics.dead_letter, headers_for=names) as reader:
        plan = await reader.plan(names, selection)
        async for batch in reader.batches(ReadPlan(plan.ranges), selection):
            for rec in batch:
                header = header_value(list(rec.headers), HEADER_CORRELATION_ID)
                if header is not None and (header not in wanted or header in found):
                    continue
                try:
                    event = deserialize(rec.value)
                except EventDecodeError:
                    continue
                correlation = str(event.correlation_id)
                if correlation not in wanted:
                    continue
                request = request_of(event)
                if request is not None and (correlation not in found or rec.topic == topics.retrieval_requested):
                    found[correlation] = request
    return found


@dataclass
class BacktestResult:
    settings: BacktestSettings
    comparisons: list[RequestComparison]
    summary: BacktestSummary

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings.describe(),
            "summary": self.summary.to_dict(),
            "requests": [c.to_dict() for c in self.comparisons],
        }


def candidates(chains: Sequence[Chain], settings: BacktestSettings) -> tuple[list[Chain], Counter[str]]:
    """The chains to backtest (most recent last, at most ``limit``) and why the others were left out."""
    left_out: Counter[str] = Counter()
    chosen = []
    for chain in chains:
        if settings.baseline == "history" and chain.injected is None:
            left_out["no_injection_to_compare"] += 1
        else:
            chosen.append(chain)
    if len(chosen) > settings.limit:
        left_out["over_limit"] += len(chosen) - settings.limit
        chosen = chosen[-settings.limit :]
    return chosen, left_out


async def backtest(
    chains: Sequence[Chain],
    requests: dict[str, Envelope[RetrievalRequested]],
    settings: BacktestSettings,
    base: Pipeline,
    new: Pipeline,
    *,
    left_out: Counter[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BacktestResult:
    comparisons: list[RequestComparison] = []
    failed: Counter[str] = Counter()
    skipped = Counter(left_out or {})
    for n, chain in enumerate(chains, 1):
        request = requests.get(chain.correlation_id)
        if request is None:
            skipped["request_not_found"] += 1
            continue
        try:
            if settings.baseline == "rerun":
                done, injected = await base(request)
                before = Injection(injected.item_ids, injected.token_estimate, done.profile, injected.empty_reason)
            else:
                assert chain.injected is not None  # candidates() keeps only injected chains for history
                before = Injection(
                    chain.injected.item_ids, chain.injected.token_estimate, chain.profile, chain.injected.empty_reason
                )
            changed = request.model_copy(update={"payload": settings.apply(request.payload)})
            done, injected = await new(changed)
        except PoisonEvent as exc:
            failed[f"rejected: {str(exc)[:120]}"] += 1
            continue
        except (RetriableError, OSError, TimeoutError) as exc:
            failed[f"unavailable: {type(exc).__name__}"] += 1
            continue
        after = Injection(injected.item_ids, injected.token_estimate, done.profile, injected.empty_reason)
        comparisons.append(
            RequestComparison(
                correlation_id=chain.correlation_id,
                project=request.project,
                session_id=request.session_id,
                agent=request.payload.agent_name,
                prompt=request.payload.prompt,
                outcome=chain.outcome_value,
                before=before,
                after=after,
                requested_at=request.emitted_at,
            )
        )
        if progress is not None:
            progress(n, len(chains))
    return BacktestResult(settings, comparisons, summarise(comparisons, failed=failed, left_out=skipped))
