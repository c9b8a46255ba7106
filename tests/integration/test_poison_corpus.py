"""The poison corpus against the running services: every bad record is dead-lettered with its reason,
committed past, and the next good request is still answered (issue 10, finding 1)."""

from __future__ import annotations

import hashlib

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import record_size
from ctxbus.adapters.kafka.reply import ReplyRouter
from ctxbus.bench.poison import MIB, Poison, a_request, corpus
from ctxbus.contract.serde import (
    HEADER_DEAD_LETTER,
    HEADER_DLQ_PREFIX,
    EventSerializer,
    decode_dead_letter,
    header_value,
)
from ctxbus.contract.topics import Topics
from ctxbus.settings import Settings
from ctxbus.state_groups import member_groups
from ctxbus.wiring import Resources

from .kafka_io import read_all, send_raw, wait_caught_up

pytestmark = pytest.mark.integration

#: CTXBUS_SERVICE_DEAD_LETTER_PREFIX_BYTES's default
PREFIX_BYTES = 65_536


def dlq(rec: ConsumerRecord[bytes, bytes], name: str) -> str | None:
    return header_value(list(rec.headers or ()), HEADER_DLQ_PREFIX + name)


def check_dead_letter(case: Poison, rec: ConsumerRecord[bytes, bytes], *, topic: str, group: str, offset: int) -> None:
    """The dead letter of ``case`` (read back from the dead-letter topic) says what happened, and fits."""
    where = f"{case.name}: "
    headers = list(rec.headers or ())
    assert dlq(rec, "reason") == case.reason, where + str(headers[-12:])
    assert dlq(rec, "error-class") == case.error_class, where
    assert (dlq(rec, "error-message") or "").startswith(f"{case.reason}: "), where
    assert dlq(rec, "original-topic") == topic and dlq(rec, "consumer-group") == group, where
    assert dlq(rec, "original-offset") == str(offset), where
    framed = decode_dead_letter(dict(headers)[HEADER_DEAD_LETTER])
    assert (framed.original_topic, framed.original_offset, framed.consumer_group) == (topic, offset, group), where
    assert framed.error_class == case.error_class and framed.error_message.startswith(case.reason), where
    assert DefaultRecordBatchBuilder.estimate_size_in_bytes(rec.key, rec.value, headers) <= MIB, where
    if not case.truncated:
        assert dlq(rec, "truncated") is None, where
        assert rec.value == case.value and rec.key == case.key, where
        kept = [h for h in headers if not h[0].startswith(HEADER_DLQ_PREFIX) and h[0] != HEADER_DEAD_LETTER]
        assert kept == [h for h in case.headers if not h[0].startswith(HEADER_DLQ_PREFIX)], where
        return
    original = case.value or b""
    assert dlq(rec, "truncated") == "true", where
    assert dlq(rec, "original-size") == str(len(original)), where
    assert dlq(rec, "original-sha256") == hashlib.sha256(original).hexdigest(), where
    assert rec.value is not None and len(rec.value) == min(len(original), PREFIX_BYTES), where
    assert original.startswith(rec.value), where


async def answered_after(kafka: KafkaClientConfig, topics: Topics) -> None:
    """A good request written after the poison, on the same partition, gets its injection."""
    good = a_request()
    async with ReplyRouter(kafka, topics.context_injected) as router:
        router.expect(good.correlation_id)
        await send_raw(kafka, topics.retrieval_requested, EventSerializer()(good), partition=0)
        injected = await router.wait(good.correlation_id, 45)
    assert injected.correlation_id == good.correlation_id


async def test_every_poison_record_is_dead_lettered_with_its_reason_and_the_pipeline_goes_on(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, topics: Topics
) -> None:
    cases = corpus()
    # the cases truncated for another reason than oversize fit the limit themselves: any ctxbus producer could send them
    near = [c for c in cases if c.truncated and c.reason != "oversize"]
    assert near and all(record_size(c.key, c.value, c.headers) <= MIB for c in near)
    at: dict[int, Poison] = {}
    for case in cases:
        _, offset = await send_raw(
            kafka, topics.retrieval_requested, case.value, key=case.key, partition=0, headers=case.headers
        )
        at[offset] = case
    await answered_after(kafka, topics)
    group = f"{settings.topic_prefix}.retriever"
    await wait_caught_up(kafka, group, topics.retrieval_requested, timeout_s=30)

    dead = await read_all(kafka, topics.dead_letter, expect=len(cases))
    assert len(dead) == len(cases)
    by_offset = {int(dlq(rec, "original-offset") or -1): rec for rec in dead}
    assert sorted(by_offset) == sorted(at)
    for offset, case in at.items():
        check_dead_letter(case, by_offset[offset], topic=topics.retrieval_requested, group=group, offset=offset)
    counted = running_pipeline.metrics.dead_letters
    for reason in {c.reason for c in cases}:
        expected = sum(1 for c in cases if c.reason == reason)
        assert counted.labels("retriever", topics.retrieval_requested, reason)._value.get() == expected, reason


async def test_an_oversize_record_on_every_consumed_topic_leaves_every_service_running(
    running_pipeline: Resources, settings: Settings, kafka: KafkaClientConfig, topics: Topics
) -> None:
    (case,) = [c for c in corpus() if c.name == "over_one_mebibyte"]
    consumers = {  # topic -> the groups that consume it
        topics.retrieval_requested: ["retriever"],
        topics.memory_upserted: ["memory"],
        topics.memory_curated: ["memory-curation"],
        topics.context_injected: ["learning-injections", "recorder"],
        topics.outcome_recorded: ["learning-outcomes", "task-outcomes"],
        topics.retrieval_completed: ["injector"],
        topics.attempt_recorded: ["attempts"],
    }
    offsets = {}
    for topic in consumers:
        offsets[topic] = (await send_raw(kafka, topic, case.value, key=case.key, partition=0))[1]
    await answered_after(kafka, topics)
    group = member_groups(settings)  # the state loops' groups are this member's own
    for topic, names in consumers.items():
        for name in names:
            await wait_caught_up(kafka, group[name], topic, timeout_s=30)

    expected = sum(len(names) for names in consumers.values())
    dead = await read_all(kafka, topics.dead_letter, expect=expected)
    seen = sorted((dlq(r, "original-topic") or "", dlq(r, "consumer-group") or "") for r in dead)
    assert seen == sorted((t, group[n]) for t, names in consumers.items() for n in names)
    for rec in dead:
        topic, group = dlq(rec, "original-topic") or "", dlq(rec, "consumer-group") or ""
        check_dead_letter(case, rec, topic=topic, group=group, offset=offsets[topic])
