"""``ctxbus replay --correlation-id ID``: one request's chain read back and opened (core.inspection).

Reads the retrieval-completed and context-injected topics (within the window, if one is given) and keeps
only the records whose ``ctxbus-correlation-id`` header names the chain: nothing else is decoded. Like
the rest of replay, it has no consumer group and never commits.
"""

from __future__ import annotations

from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer
from ctxbus.contract.topics import Topics
from ctxbus.core.inspection import inspect_chain
from ctxbus.replay.options import Selection
from ctxbus.replay.read import TopicReader


async def read_chain(
    config: KafkaClientConfig, topics: Topics, correlation_id: str, selection: Selection
) -> dict[str, Any] | None:
    """The chain's inspection document, or None when neither of its events is in range."""
    wanted = correlation_id.strip().encode()
    names = [topics.retrieval_completed, topics.context_injected]
    deserialize = EventDeserializer()
    completed: Envelope[RetrievalCompleted] | None = None
    injected: Envelope[ContextInjected] | None = None
    async with TopicReader(config, client_id="replay-chain", headers_for=names) as reader:
        plan = await reader.plan(names, selection)
        async for batch in reader.batches(plan, selection):
            for record in batch:
                if (HEADER_CORRELATION_ID, wanted) not in record.headers:
                    continue
                try:
                    if record.topic == topics.retrieval_completed:
                        completed = deserialize(record.value, expect=EventType.RETRIEVAL_COMPLETED)  # type: ignore[assignment]
                    else:
                        injected = deserialize(record.value, expect=EventType.CONTEXT_INJECTED)  # type: ignore[assignment]
                except EventDecodeError:
                    continue  # the header matched but the bytes are not an event: nothing to open
    if completed is None and injected is None:
        return None
    return inspect_chain(correlation_id.strip(), completed, injected)
