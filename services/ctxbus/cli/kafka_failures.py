"""One line, never a traceback, when a command cannot use Kafka: bad security settings or no connection."""

from __future__ import annotations

import asyncio

from aiokafka.errors import KafkaConnectionError

from ctxbus.adapters.kafka.admin import MissingTopic
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.probe import connection_failure
from ctxbus.adapters.kafka.security import KafkaSecurityError
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings


def unreachable(config: KafkaClientConfig, exc: BaseException) -> str:
    """Why the clients of ``config`` failed with ``exc``: the probe's cause when it finds one."""
    try:
        cause = asyncio.run(connection_failure(config))
    except Exception:  # the probe only adds detail; the original error still gets its line
        cause = None
    return f"cannot reach the Kafka cluster at {config.bootstrap_servers}: " + (
        cause or f"{exc or type(exc).__name__} (check CTXBUS_KAFKA_BOOTSTRAP_SERVERS and the security settings)"
    )


def explain(exc: BaseException) -> str | None:
    """The line for an error that escaped a command, if it is a Kafka configuration or connection failure."""
    if isinstance(exc, (KafkaSecurityError, MissingTopic)):
        return str(exc)
    if isinstance(exc, KafkaConnectionError):
        try:
            config = kafka_config(Settings())
        except (NoBroker, ValueError):
            return f"cannot reach Kafka: {exc}"
        return unreachable(config, exc)
    return None
