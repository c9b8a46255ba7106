"""Topic administration: create the ctxbus topics if they do not exist."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from ctxbus.adapters.kafka.config import KafkaClientConfig


class MissingTopic(LookupError):
    """A topic a client needs is not on the cluster (``ctxbus topics create`` makes them)."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} does not exist on the cluster; create the topics with `ctxbus topics create`")
        self.topic = topic


async def ensure_topics(
    config: KafkaClientConfig,
    topics: Iterable[str],
    *,
    partitions: int,
    replication: int,
    compacted: Iterable[str] = (),
) -> list[str]:
    """Create the missing topics; returns the ones created (existing ones are left as they are).

    ``compacted`` topics (keyed state, such as the schemas topic) get one partition and
    ``cleanup.policy=compact``."""
    compact = set(compacted)
    admin = AIOKafkaAdminClient(**config.common("admin"))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in dict.fromkeys(topics) if t not in existing]
        if missing:
            await admin.create_topics(
                [
                    NewTopic(
                        name=t,
                        num_partitions=1 if t in compact else partitions,
                        replication_factor=replication,
                        topic_configs={"cleanup.policy": "compact"} if t in compact else {},
                    )
                    for t in missing
                ]
            )
        return missing
    finally:
        await admin.close()
