"""The injector's consumer loops: completed retrievals injected, agent attempts recorded for pre-context, and the
tasks an outcome ended closed."""

from __future__ import annotations

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.adapters.kafka.topic_ends import TopicEnds
from ctxbus.components import injector_handler, utc_now
from ctxbus.contract.envelope import EventType
from ctxbus.contract.topics import Topics
from ctxbus.injector.attempts import AttemptRecorderHandler, TaskOutcomeHandler
from ctxbus.injector.expiry import InjectorDeadlines
from ctxbus.injector.fence import AttemptsFence
from ctxbus.state_groups import state_group
from ctxbus.wiring.resources import Resources, RunnerSpec


def injector_runners(res: Resources, topics: Topics, config: KafkaClientConfig | None = None) -> list[RunnerSpec]:
    """The injector's loops (its attempt store opened into ``res`` unless it is there); with ``config`` its
    pre-context waits for the attempts recorded before its request (``ctxbus.injector.fence``)."""
    s = res.settings
    prefix = s.topic_prefix
    if res.attempts is None:
        res.attempts = AttemptStore(s.attempts_db)
    progress = Progress()
    fence = None
    if config is not None and s.precontext.fence_wait_s > 0:
        ends = TopicEnds(config, topics.attempt_recorded, client_id="attempts-ends")
        res.async_closers.append(ends.stop)
        fence = AttemptsFence(ends, progress, wait_s=s.precontext.fence_wait_s, clock=utc_now)
    injector = injector_handler(s, topics, res.metrics, embedder=res.embedder, attempts=res.attempts, fence=fence)
    attempts_group = state_group(prefix, "attempts", res.attempts.state_id)
    return [
        RunnerSpec(
            "injector",
            InjectorDeadlines(injector, topic=topics.context_injected, metrics=res.metrics, clock=utc_now),
            topics.retrieval_completed,
            EventType.RETRIEVAL_COMPLETED,
            (topics.context_injected,),
            # awake when a request enters the pipeline: fetching by the time the retriever answers
            wake_on=(topics.retrieval_requested,),
        ),
        RunnerSpec(
            "attempts",
            AttemptRecorderHandler(res.attempts),
            topics.attempt_recorded,
            EventType.ATTEMPT_RECORDED,
            background=True,
            group=attempts_group,
            progress=progress,
        ),
        RunnerSpec(
            "task-outcomes",
            TaskOutcomeHandler(res.attempts),
            topics.outcome_recorded,
            EventType.OUTCOME_RECORDED,
            background=True,
            group=state_group(prefix, "task-outcomes", res.attempts.state_id),
        ),
    ]
