"""Every Kafka failure the CLI can meet ends in one line naming the cause, exit 1, no traceback (issue 27).

On the real clients, as processes with only ``CTXBUS_*`` variables set, against the test front (``secure_front``)
answering what a failing broker answers: a SCRAM server-final carrying an RFC 5802 ``e=`` error (aiokafka 0.14
raised ``KeyError: 'v'``), topic creation refused for want of authorisation (cluster or topic: the admin client
returns the refusal as an error code, without raising), a produce refused (authorisation, a record larger than
the broker takes), a topic that does not exist, a cluster nobody listens at. TLS and SASL settings' failures
are in ``test_secure_failures.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbus.adapters.broker_embedded import free_port

from .secure_env import USERS, front_env
from .secure_front import (
    API_CREATE_TOPICS,
    API_PRODUCE,
    CLUSTER_AUTHORIZATION_FAILED,
    MESSAGE_TOO_LARGE,
    TOPIC_AUTHORIZATION_FAILED,
    SecureFront,
)
from .test_secure_failures import REQUEST, TOPICS, assert_one_clear_line, ctxbus

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("args", [TOPICS, REQUEST], ids=["topics-create", "request"])
async def test_a_scram_final_with_an_error(mechanism: str, args: tuple[str, ...], tmp_path: Path) -> None:
    async with SecureFront(mechanisms=(mechanism,), users=USERS, scram_final_error="invalid-proof") as front:
        code, err = await ctxbus(front_env(front, "SASL_PLAINTEXT", mechanism=mechanism), args, tmp_path)
        assert front.refused and "e=invalid-proof" in front.refused[-1]
    assert_one_clear_line(code, err, "SASL authentication failed", mechanism, "invalid-proof")


@pytest.mark.parametrize(
    ("error", "expected"),
    [(CLUSTER_AUTHORIZATION_FAILED, "ClusterAuthorizationFailed"), (TOPIC_AUTHORIZATION_FAILED, "TopicAuthorization")],
    ids=["cluster", "topic"],
)
async def test_topic_creation_the_broker_does_not_authorise(error: int, expected: str, tmp_path: Path) -> None:
    async with SecureFront(refuse={API_CREATE_TOPICS: error}) as front:
        code, err = await ctxbus(front_env(front, "PLAINTEXT"), TOPICS, tmp_path)
        assert front.answered and front.answered[0][0] == API_CREATE_TOPICS
    last = assert_one_clear_line(code, err, "not authorised", expected, "ctxbus.context.retrieval.requested.v1")
    assert "created" not in err.replace(last, "")  # nothing claims to have been created


@pytest.mark.parametrize(
    ("error", "expected"),
    [(TOPIC_AUTHORIZATION_FAILED, "not authorised"), (MESSAGE_TOO_LARGE, "message.max.bytes")],
    ids=["topic-authorisation", "too-large"],
)
async def test_a_produce_the_broker_refuses(error: int, expected: str, tmp_path: Path) -> None:
    async with SecureFront() as front:
        env = front_env(front, "PLAINTEXT")
        code, err = await ctxbus(env, TOPICS, tmp_path)
        assert code == 0, err
        front.refuse[API_PRODUCE] = error  # connections made from here on
        code, err = await ctxbus(env, REQUEST, tmp_path)
        assert any(key == API_PRODUCE for key, _ in front.answered)
    assert_one_clear_line(code, err, "the Kafka cluster refused", expected)


async def test_a_topic_that_does_not_exist(tmp_path: Path) -> None:
    async with SecureFront() as front:
        code, err = await ctxbus(front_env(front, "PLAINTEXT"), REQUEST, tmp_path)
    assert_one_clear_line(code, err, "does not exist", "ctxbus topics create")


@pytest.mark.parametrize("args", [TOPICS, REQUEST], ids=["topics-create", "request"])
async def test_a_cluster_nobody_listens_at(args: tuple[str, ...], tmp_path: Path) -> None:
    port = free_port()
    env = {"CTXBUS_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}"}
    code, err = await ctxbus(env, args, tmp_path)
    assert_one_clear_line(code, err, "cannot reach the Kafka cluster", f"127.0.0.1:{port}", "Connect call failed")
