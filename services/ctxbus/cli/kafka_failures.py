"""One line, never a traceback, for every Kafka failure a command can meet: bad security settings, no connection,
a refused authorisation, a missing topic, a record too large, any other error of the Kafka client."""

from __future__ import annotations

import asyncio
import traceback

from aiokafka import errors

from ctxbus.adapters.kafka.admin import MissingTopic, TopicsRefused
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.probe import connection_failure
from ctxbus.adapters.kafka.security import KafkaSecurityError
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings

_AUTHORISATION = (
    errors.TopicAuthorizationFailedError,
    errors.GroupAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
    errors.TransactionalIdAuthorizationFailed,
)
#: where the Kafka client's own code lives: an exception raised from there is a Kafka failure, whatever its type
_CLIENT_PACKAGE = "/aiokafka/"


def unreachable(config: KafkaClientConfig, exc: BaseException) -> str:
    """Why the clients of ``config`` failed with ``exc``: the probe's cause when it finds one."""
    try:
        cause = asyncio.run(connection_failure(config))
    except Exception:  # the probe only adds detail; the original error still gets its line
        cause = None
    return f"cannot reach the Kafka cluster at {config.bootstrap_servers}: " + (
        cause or f"{exc or type(exc).__name__} (check CTXBUS_KAFKA_BOOTSTRAP_SERVERS and the security settings)"
    )


def refused(exc: BaseException) -> str | None:
    """The line for a failure the cluster answered (the connection worked): authorisation, a record too large, a
    topic it refused to create or that is missing; None for any other error."""
    if isinstance(exc, (KafkaSecurityError, MissingTopic, TopicsRefused)):
        return str(exc)
    if isinstance(exc, _AUTHORISATION):
        return (
            f"the Kafka cluster refused: not authorised ({_said(exc)}): the user of CTXBUS_KAFKA_SASL_USERNAME "
            "needs the ACLs on the ctxbus topics and groups (prefix CTXBUS_TOPIC_PREFIX; docs/deployment.md)"
        )
    if isinstance(exc, errors.MessageSizeTooLargeError):
        return (
            f"the Kafka cluster refused a record as too large ({_said(exc)}): raise the broker's message.max.bytes "
            "(or the topic's max.message.bytes), or lower CTXBUS_KAFKA_MAX_RECORD_BYTES so ctxbus refuses it first"
        )
    return None


def for_config(config: KafkaClientConfig, exc: BaseException) -> str:
    """The line for a Kafka error of a command that knows its cluster: what the cluster refused, else why it
    cannot be reached (the probe), else the client's error named."""
    line = refused(exc)
    if line is not None:
        return line
    if isinstance(exc, (errors.KafkaConnectionError, errors.SaslAuthenticationFailed, OSError, KeyError)) or (
        not isinstance(exc, errors.KafkaError)
    ):
        return unreachable(config, exc)
    return f"the Kafka client failed ({_said(exc)}) talking to {config.bootstrap_servers}"


def explain(exc: BaseException) -> str | None:
    """The line for an error that escaped a command, if it is a Kafka failure (an aiokafka error, or any error
    raised from within the Kafka client)."""
    line = refused(exc)
    if line is not None:
        return line
    if not isinstance(exc, errors.KafkaError) and not _from_client(exc):
        return None
    try:
        config = kafka_config(Settings())
    except (NoBroker, ValueError):
        return f"Kafka failed: {_said(exc)}"
    return for_config(config, exc)


def _said(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return text if name in text else f"{name}: {text}" if text else name


def _from_client(exc: BaseException) -> bool:
    """Whether ``exc`` was raised from the Kafka client's code (the last frame of its traceback is in aiokafka)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and _CLIENT_PACKAGE in frames[-1].filename.replace("\\", "/")
