"""The retriever's consumer loops: requests answered, memory stored (``memory_loop``), forgets and pins kept, and
what outcomes teach learned; they open, and share through ``Resources``, the process's embedder, store and ledgers."""

from __future__ import annotations

from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.components import open_embedder, open_store, retriever_handler, utc_now
from ctxbus.contract.envelope import EventType
from ctxbus.contract.topics import Topics
from ctxbus.learning.handler import LearningHandler, relearn
from ctxbus.retriever.expiry import RetrieverDeadlines
from ctxbus.retriever.memory_curation import MemoryCurationHandler
from ctxbus.retriever.memory_upserts import MemoryUpsertHandler
from ctxbus.state_groups import state_group
from ctxbus.wiring.resources import Resources, RunnerSpec


def retriever_runners(res: Resources, topics: Topics) -> list[RunnerSpec]:
    """The retriever's loops (its embedder, store and ledgers opened into ``res`` unless they are there)."""
    s = res.settings
    prefix = s.topic_prefix
    if res.embedder is None:
        res.embedder = open_embedder(s)
    if res.store is None:
        res.store = open_store(s, res.embedder)
    from ctxbus.adapters.embedding.query_cache import CachedQueryEmbedder  # noqa: PLC0415

    # the next queries embedded together, prompts asked again not embedded again
    queries = CachedQueryEmbedder(res.embedder, size=s.embedder.query_cache)
    retriever = retriever_handler(s, queries, res.store, topics, res.metrics, query_batch=s.embedder.query_batch)
    res.warm = retriever.warm
    res.forget = retriever.forget_session
    if res.ledger is None:
        res.ledger = LearningLedger(s.learning_db)
    learning = LearningHandler(res.ledger, res.store)
    if res.curation is None:
        res.curation = CurationLedger(s.curation_db)
    return [
        RunnerSpec(
            "retriever",
            # requests past (or about to miss) their deadline are answered at once, the oldest first under load
            RetrieverDeadlines(
                retriever,
                topic=topics.retrieval_completed,
                embedding_model=res.embedder.model_id,
                metrics=res.metrics,
                clock=utc_now,
            ),
            topics.retrieval_requested,
            EventType.RETRIEVAL_REQUESTED,
            (topics.retrieval_completed,),
        ),
        memory_loop(res, topics, shared_store=bool(s.qdrant.url)),
        # ... and forgets and pins: what was forgotten is remembered (by every member: every member's upserts
        # are checked against it), so no upsert brings it back
        RunnerSpec(
            "memory-curation",
            MemoryCurationHandler(res.store, res.curation),
            topics.memory_curated,
            EventType.MEMORY_CURATED,
            background=True,
            group=state_group(prefix, "memory-curation", res.curation.state_id),
        ),
        # ... and what outcomes teach about the injected items: every member reads every injection and outcome
        # into its own ledger, so every member's counts are the same (a function of the set of facts)
        RunnerSpec(
            "learning-injections",
            learning.injections,
            topics.context_injected,
            EventType.CONTEXT_INJECTED,
            background=True,
            group=state_group(prefix, "learning-injections", res.ledger.state_id),
        ),
        RunnerSpec(
            "learning-outcomes",
            learning.outcomes,
            topics.outcome_recorded,
            EventType.OUTCOME_RECORDED,
            background=True,
            group=state_group(prefix, "learning-outcomes", res.ledger.state_id),
        ),
    ]


def memory_loop(res: Resources, topics: Topics, *, shared_store: bool) -> RunnerSpec:
    """Memory sent through the bus, stored by the retrievers, each answering an upsert once its items are searchable.

    One Qdrant server (``shared_store``): one write reaches every member, so the members share the work in the
    service's group, and a redelivered upsert is recognised by its answer. Embedded copies (Qdrant Edge, one per
    member): every member stores every upsert in its own copy, in a group of its own, and answers it too (an asker
    takes the first answer); its answers carry its group, so another member's answer never counts as its own."""
    embedder, store, curation, ledger = res.embedder, res.store, res.curation, res.ledger
    if embedder is None or store is None or curation is None or ledger is None:
        raise RuntimeError("the memory loop runs beside the retriever, on its embedder, store and ledgers")
    # an item stored after the outcomes that count for it gets their counts (a member's loops run at their own pace)
    handler = MemoryUpsertHandler(embedder, store, topics, curation, learned=relearn(ledger, store))
    prefix = res.settings.topic_prefix
    if shared_store:
        return RunnerSpec(
            "memory", handler, topics.memory_upserted, EventType.MEMORY_UPSERTED, (topics.memory_stored,), True
        )
    group = state_group(prefix, "memory", curation.state_id)
    return RunnerSpec(
        "memory",
        handler,
        topics.memory_upserted,
        EventType.MEMORY_UPSERTED,
        (topics.memory_stored,),
        background=True,
        group=group,
        answered_by=group,
    )
