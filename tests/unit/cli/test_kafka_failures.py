"""Each kind of Kafka failure maps to one line naming its cause (cli.kafka_failures, adapters.kafka.admin).

The integration tests (tests/integration/test_kafka_failures.py) meet these failures on the real clients through
the test front; here the mapping itself, and what counts as a failure of the Kafka client."""

from __future__ import annotations

import pytest
from aiokafka import errors

from ctxbus.adapters.kafka.admin import TopicsRefused, _refused
from ctxbus.cli.kafka_failures import _from_client, refused


def test_a_create_topics_answer_refuses_only_real_errors() -> None:
    answer = [("a", 0, None), ("b", 36, "exists already"), ("c", 29, "no"), ("d", 31, "")]
    assert _refused(answer) == {"c": (29, "no"), "d": (31, None)}
    assert _refused([("a", 0), ("b", 41)]) == {"b": (41, None)}  # version 0: no messages


def test_a_refused_creation_names_the_topics_the_error_and_the_acl() -> None:
    line = str(TopicsRefused({"ctxbus.x": (31, None), "ctxbus.y": (31, None)}))
    assert "2 topic(s) (ctxbus.x, ctxbus.y)" in line and "ClusterAuthorizationFailedError" in line
    assert "not authorised" in line and "ACLs" in line
    other = str(TopicsRefused({"ctxbus.x": (38, "replication factor 3 > 1 broker")}))
    assert "InvalidReplicationFactorError (replication factor 3 > 1 broker)" in other
    assert "_TOPIC_REPLICATION" in other and "not authorised" not in other


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (errors.TopicAuthorizationFailedError("ctxbus.t"), "not authorised"),
        (errors.GroupAuthorizationFailedError("ctxbus.retriever"), "not authorised"),
        (errors.ClusterAuthorizationFailedError(), "not authorised"),
        (errors.MessageSizeTooLargeError(), "message.max.bytes"),
    ],
)
def test_what_the_cluster_refused_is_one_line(exc: Exception, expected: str) -> None:
    line = refused(exc)
    assert line is not None and expected in line and type(exc).__name__ in line and "\n" not in line


def test_other_errors_are_not_taken_for_refusals() -> None:
    assert refused(errors.KafkaConnectionError("down")) is None
    assert refused(ValueError("x")) is None


def test_an_error_raised_from_within_the_kafka_client_is_recognised() -> None:
    from aiokafka.conn import collect_hosts

    with pytest.raises(ValueError) as inside:
        collect_hosts("broker:notaport")
    assert _from_client(inside.value)
    with pytest.raises(KeyError) as outside:
        {}["v"]
    assert not _from_client(outside.value)
