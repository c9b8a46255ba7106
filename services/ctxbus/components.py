"""Builders of the parts every entry point shares: the embedder, the store, the token counter, the ranking
weights, the relevance floor, and the retriever's and injector's handlers as every caller builds them (the
services, the Python API, the CLI, backtests and benchmarks).

Below :mod:`ctxbus.wiring` and :mod:`ctxbus.api`: it imports adapters and service handlers, never the API, the
gateway or the wiring that runs the services.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.contract.topics import Topics
from ctxbus.core.abstain import FloorPolicy
from ctxbus.core.ranking import RankingWeights
from ctxbus.core.task_profiles import NO_TASK_PROFILES, TASK_TYPE_PROFILES
from ctxbus.core.task_prototypes import build_classifier
from ctxbus.core.tokens import MemoizedCounter
from ctxbus.injector.attempts import policy_from
from ctxbus.injector.handler import InjectorHandler
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, SearchMode, VectorStore
from ctxbus.retriever.handler import RetrieverHandler
from ctxbus.settings import InjectionSettings, Settings


def utc_now() -> datetime:
    return datetime.now(UTC)


def open_embedder(settings: Settings) -> Embedder:
    from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder  # noqa: PLC0415  (heavy import)

    embedder = OnnxMiniLmEmbedder(settings.embedder)
    embedder.warm_up()  # the first request should not pay for loading the model
    return embedder


def token_counter(settings: Settings, embedder: Embedder | None = None) -> Callable[[str], int]:
    """Tokens as the model counts them (its tokenizer only: the ONNX session is not loaded for this); short texts'
    counts remembered (the same memories' lines are counted for every request)."""
    if embedder is not None:
        return MemoizedCounter(embedder.count_tokens)
    from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder  # noqa: PLC0415

    return MemoizedCounter(OnnxMiniLmEmbedder(settings.embedder).count_tokens)


def open_store(settings: Settings, embedder: Embedder) -> VectorStore:
    """The configured Qdrant server, else the embedded Qdrant Edge shard (owned by this process)."""
    if settings.qdrant.url:
        from ctxbus.adapters.store_qdrant_server import QdrantServerStore  # noqa: PLC0415

        return QdrantServerStore.connect(settings.qdrant, model_id=embedder.model_id, dim=embedder.dim)
    from ctxbus.adapters.store_edge import EdgeVectorStore  # noqa: PLC0415

    return EdgeVectorStore(
        settings.store_dir, model_id=embedder.model_id, dim=embedder.dim, item_cache=settings.qdrant.item_cache
    )


def open_built_store(settings: Settings) -> VectorStore | None:
    """The configured store as it was built, for reading (``ctxbus status``): an embedded one is opened with the
    model id and dimension its own record names (no model is loaded), None when there is none yet; a server's
    collection needs the embedder's. Raises StoreBusy when another process owns the embedded store."""
    if settings.qdrant.url:
        return open_store(settings, open_embedder(settings))
    from ctxbus.adapters.store_edge import META_FILE, EdgeVectorStore  # noqa: PLC0415

    try:
        record = json.loads((settings.store_dir / META_FILE).read_text(encoding="utf-8"))
        model_id, dim = str(record["model_id"]), int(record["dim"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return EdgeVectorStore(settings.store_dir, model_id=model_id, dim=dim, item_cache=0)


def ranking_weights(settings: Settings) -> RankingWeights:
    i = settings.injection
    return RankingWeights(
        fusion=i.weight_fusion,
        similarity=i.weight_similarity,
        lexical=i.weight_lexical,
        domain=i.weight_domain,
        conviction=i.weight_conviction,
        recency=i.weight_recency,
        half_life_days=i.half_life_days,
    )


def floor_policy(injection: InjectionSettings) -> FloorPolicy:
    """The relevance floor the settings ask for (``CTXBUS_INJECTION_MIN_RELEVANCE`` and ``_RELEVANCE_*``)."""
    return FloorPolicy(
        min_relevance=injection.min_relevance,
        pack_size=injection.relevance_pack,
        margin_weight=injection.relevance_margin_weight,
        keyword_weight=injection.relevance_keyword_weight,
        size_slope=injection.relevance_size_slope,
        reference_size=injection.relevance_reference_size,
        margin_from=injection.relevance_margin_from,
    )


def retriever_handler(
    settings: Settings,
    embedder: Embedder,
    store: VectorStore,
    topics: Topics,
    metrics: Metrics,
    *,
    query_batch: int = 1,
) -> RetrieverHandler:
    """The retriever as every caller builds it (the service, the Python API, the CLI, backtests)."""
    return RetrieverHandler(
        embedder,
        store,
        topics,
        metrics,
        weights=ranking_weights(settings),
        min_score=settings.injection.min_score,
        min_similarity=settings.injection.min_similarity,
        clock=utc_now,
        classifier=build_classifier(embedder),
        mode=SearchMode(settings.injection.search_mode),
        task_profiles=TASK_TYPE_PROFILES if settings.injection.task_profiles else NO_TASK_PROFILES,
        floor=floor_policy(settings.injection),
        skip_meta_prompts=settings.injection.skip_meta_prompts,
        query_batch=query_batch,
    )


def injector_handler(
    settings: Settings,
    topics: Topics,
    metrics: Metrics,
    *,
    embedder: Embedder | None = None,
    attempts: AttemptStore | None = None,
    fence: Callable[[datetime | None], Awaitable[bool]] | None = None,
) -> InjectorHandler:
    """The injector as every caller builds it (``fence``: the services' read-your-writes, ctxbus.injector.fence)."""
    return InjectorHandler(
        topics,
        metrics,
        settings.injection,
        clock=utc_now,
        attempts=attempts,
        precontext=policy_from(settings.precontext),
        count_tokens=token_counter(settings, embedder),
        fence=fence,
    )
