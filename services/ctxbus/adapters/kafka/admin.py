"""Topic administration: create the ctxbus topics if they do not exist."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from ctxbus.adapters.kafka.config import KafkaClientConfig


class MissingTopic(LookupError):
    """A topic a client needs is not on the cluster (``ctxbus topics create`` makes them)."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic} does not exist on the cluster; create the topics with `ctxbus topics create`")
        self.topic = topic


#: the broker's answer to a topic that another client created meanwhile: it exists, as wanted
TOPIC_ALREADY_EXISTS = 36
_AUTHORISATION = (errors.TopicAuthorizationFailedError, errors.ClusterAuthorizationFailedError)


class TopicsRefused(RuntimeError):
    """The cluster answered a creation of topics with an error for some of them (aiokafka returns those error
    codes without raising): which topics, the error, and what to check."""

    def __init__(self, refused: dict[str, tuple[int, str | None]]) -> None:
        self.refused = refused
        code, said = next(iter(refused.values()))
        kind = errors.for_code(code)
        name = kind.__name__ if kind is not errors.UnknownError or code == -1 else f"error {code}"
        if issubclass(kind, _AUTHORISATION):
            hint = (
                "not authorised: the user of CTXBUS_KAFKA_SASL_USERNAME needs CREATE on the cluster or on these "
                "topics (Kafka ACLs), or an administrator creates them"
            )
        else:
            hint = "check the broker's log and the topic settings (CTXBUS_KAFKA_TOPIC_PARTITIONS, _TOPIC_REPLICATION)"
        topics = ", ".join(refused)
        super().__init__(
            f"the cluster refused to create {len(refused)} topic(s) ({topics}): {name}"
            + (f" ({said})" if said else "")
            + f"; {hint}"
        )


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
    ``cleanup.policy=compact``. Raises TopicsRefused when the cluster refuses any of them."""
    compact = set(compacted)
    admin = AIOKafkaAdminClient(**config.common("admin"))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in dict.fromkeys(topics) if t not in existing]
        if missing:
            response = await admin.create_topics(
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
            refused = _refused(response.topic_errors)
            if refused:
                raise TopicsRefused(refused)
        return missing
    finally:
        await admin.close()


def _refused(topic_errors: list[tuple[object, ...]]) -> dict[str, tuple[int, str | None]]:
    """The topics a CreateTopics answer refused (any version: topic, code[, message]), with code and message."""
    refused: dict[str, tuple[int, str | None]] = {}
    for entry in topic_errors:
        topic, code = str(entry[0]), int(entry[1])  # type: ignore[call-overload]
        if code not in (0, TOPIC_ALREADY_EXISTS):
            message = entry[2] if len(entry) > 2 and isinstance(entry[2], str) and entry[2] else None
            refused[topic] = (code, message)
    return refused
