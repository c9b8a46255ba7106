"""The shared consumer loop on a real broker: dead letters (records too large included), retries, dedupe,
restarts, graceful stop."""

from __future__ import annotations

import asyncio
import hashlib
import io
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import fastavro
import pytest
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.handling import Output, PoisonEvent, RetriableError
from ctxbus.adapters.kafka.ledger import recent_causes
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.runner import ConsumerRunner
from ctxbus.contract.envelope import AnyEnvelope, Envelope, EventType
from ctxbus.contract.payloads import RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.registry import default_registry
from ctxbus.contract.serde import (
    HEADER_DEAD_LETTER,
    HEADER_DLQ_PREFIX,
    EventDeserializer,
    EventSerializer,
    decode_dead_letter,
    frame,
    header_value,
    to_record,
)
from ctxbus.contract.topics import Topics
from ctxbus.observability import Metrics
from ctxbus.settings import Settings

from .kafka_io import caught_up, read_all, send_raw, wait_caught_up

if TYPE_CHECKING:
    from ctxbus.adapters.kafka.publisher import PreparedRecord

pytestmark = pytest.mark.integration


def a_request(prompt: str = "fix the login bug", session: str = "s1") -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="test", prompt=prompt, trigger=Trigger.USER_PROMPT)
    return Envelope.root(payload, project="p", session_id=session, producer="test")


class EchoHandler:
    """Answers each request with an empty completion; optional scripted failures."""

    def __init__(self, topics: Topics, failures: Sequence[Exception] = (), delay_s: float = 0.0) -> None:
        self.topics = topics
        self.failures = list(failures)
        self.calls = 0
        self.delay_s = delay_s

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.failures:
            raise self.failures.pop(0)
        assert isinstance(event.payload, RetrievalRequested)
        completed = RetrievalCompleted(
            request=event.payload,
            request_emitted_at=event.emitted_at,
            items=(),
            retrieval_duration_ms=0.0,
            embedding_model="none",
        )
        return [Output(self.topics.retrieval_completed, event.caused(completed, producer="echo"))]


def make_runner(
    settings: Settings,
    kafka: KafkaClientConfig,
    topics: Topics,
    handler: EchoHandler,
    publisher: EventPublisher,
    metrics: Metrics,
) -> ConsumerRunner:
    return ConsumerRunner(
        name="echo",
        config=kafka,
        topic=topics.retrieval_requested,
        group_id=f"{settings.topic_prefix}.echo",
        handler=handler,
        publisher=publisher,
        dead_letter_topic=topics.dead_letter,
        expect_event_type=EventType.RETRIEVAL_REQUESTED,
        settings=settings.service,
        metrics=metrics,
        output_topics=(topics.retrieval_completed,),
    )


async def run_until_caught_up(runner: ConsumerRunner, kafka: KafkaClientConfig, group: str, topic: str) -> None:
    """Run until the group's committed offsets reach the end of the input topic, then stop."""
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await wait_caught_up(kafka, group, topic, alive=lambda: not task.done())
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def GROUP(settings: Settings) -> str:
    return f"{settings.topic_prefix}.echo"


def invalid_request_bytes() -> bytes:
    """Well-framed Avro that breaks the payload's bounds (max_items = 0)."""
    record = to_record(a_request())
    record["payload"]["max_items"] = 0
    entry = default_registry().current(EventType.RETRIEVAL_REQUESTED)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, entry.schema, record)
    return frame(entry.schema_id, buf.getvalue())


async def test_poison_goes_to_the_dead_letter_topic_and_the_service_moves_on(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    poison = {
        b"garbage bytes": "EventDecodeError",
        b"\x00\x00\x00\x03\xe7" + b"x" * 20: "UnknownSchemaId",
        invalid_request_bytes(): "InvalidEvent",
    }
    for value in poison:
        await send_raw(kafka, topics.retrieval_requested, value, partition=0)
    good = a_request()
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(topics.retrieval_requested, good)
        handler = EchoHandler(topics)
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )

    dead = await read_all(kafka, topics.dead_letter, expect=3)
    assert len(dead) == 3
    by_value = {rec.value: rec for rec in dead}
    assert set(by_value) == set(poison)
    for value, error_class in poison.items():
        rec = by_value[value]
        headers = list(rec.headers)
        assert header_value(headers, "ctxbus-dlq-original-topic") == topics.retrieval_requested
        assert header_value(headers, "ctxbus-dlq-original-partition") == "0"
        assert header_value(headers, "ctxbus-dlq-error-class") == error_class
        assert header_value(headers, "ctxbus-dlq-error-message")
        structured = decode_dead_letter(dict(headers)[HEADER_DEAD_LETTER])
        assert structured.error_class == error_class
        assert structured.consumer_group == f"{settings.topic_prefix}.echo"
    offsets = sorted(int(header_value(list(r.headers), "ctxbus-dlq-original-offset") or -1) for r in dead)
    assert offsets == [0, 1, 2]

    out = await read_all(kafka, topics.retrieval_completed, expect=1)
    assert [EventDeserializer()(r.value).causation_id for r in out] == [good.event_id]
    assert await caught_up(kafka, GROUP(settings), topics.retrieval_requested)
    assert metrics.dead_letters.labels("echo", topics.retrieval_requested, "undecodable")._value.get() == 1


async def test_retriable_failures_are_retried_then_succeed(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    async with EventPublisher(kafka, "t") as pub:
        await pub.publish(topics.retrieval_requested, a_request())
        handler = EchoHandler(topics, failures=[RetriableError("blip"), TimeoutError("slow")])
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )
    assert handler.calls == 3
    assert len(await read_all(kafka, topics.retrieval_completed, expect=1)) == 1
    assert await read_all(kafka, topics.dead_letter, expect=0, timeout_s=1) == []


async def test_exhausted_retries_and_rejections_are_dead_lettered(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    failures: list[Exception] = [RetriableError("down")] * (settings.service.max_retries + 1)
    failures.append(PoisonEvent("cannot serve this agent"))
    async with EventPublisher(kafka, "t") as pub:
        first, second = a_request("one"), a_request("two")
        await pub.publish(topics.retrieval_requested, first)
        await pub.publish(topics.retrieval_requested, second)
        handler = EchoHandler(topics, failures=failures)
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )
    dead = await read_all(kafka, topics.dead_letter, expect=2)
    messages = sorted(header_value(list(r.headers), "ctxbus-dlq-error-message") or "" for r in dead)
    assert messages[0].startswith("rejected: cannot serve")
    assert messages[1].startswith("retries_exhausted: down")
    assert {decode_dead_letter(dict(r.headers)[HEADER_DEAD_LETTER]).attempts for r in dead} == {
        1,
        settings.service.max_retries + 1,
    }


async def test_a_redelivered_event_is_answered_once(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    event = a_request()
    data = EventSerializer()(event)
    for _ in range(3):
        await send_raw(kafka, topics.retrieval_requested, data, key=str(event.entity_id).encode())
    async with EventPublisher(kafka, "t") as pub:
        handler = EchoHandler(topics)
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )
    assert handler.calls == 1
    assert len(await read_all(kafka, topics.retrieval_completed, expect=1)) == 1
    assert metrics.consumed.labels("echo", topics.retrieval_requested, "duplicate")._value.get() == 2


async def test_outputs_already_on_the_topic_are_not_produced_again_after_a_restart(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    """As after a crash between produce and commit: the output exists, the input is uncommitted."""
    event = a_request()
    handler = EchoHandler(topics)
    async with EventPublisher(kafka, "t") as pub:
        (output,) = await handler(event)
        await pub.publish(output.topic, output.event)
        await pub.publish(topics.retrieval_requested, event)
        assert await recent_causes(kafka, [topics.retrieval_completed], 100) == [str(event.event_id)]
        handler.calls = 0
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )
    assert handler.calls == 0
    assert len(await read_all(kafka, topics.retrieval_completed, expect=1)) == 1
    assert await caught_up(kafka, GROUP(settings), topics.retrieval_requested)


async def test_stop_finishes_the_event_in_flight_and_commits_it(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    async with EventPublisher(kafka, "t") as pub:
        handler = EchoHandler(topics, delay_s=1.5)
        runner = make_runner(settings, kafka, topics, handler, pub, metrics)
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        await asyncio.wait_for(runner.ready.wait(), 15)
        await pub.publish(topics.retrieval_requested, a_request())
        while handler.calls == 0:
            await asyncio.sleep(0.01)
        stop.set()  # while the handler sleeps
        await asyncio.wait_for(task, 30)
    assert len(await read_all(kafka, topics.retrieval_completed, expect=1)) == 1
    assert await caught_up(kafka, GROUP(settings), topics.retrieval_requested)


async def test_a_rebalance_between_two_members_answers_everything_exactly_once(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    """Member A runs alone, B joins (partitions move), A leaves (they move back): no loss, no duplicate."""
    group = GROUP(settings)
    sent: list[str] = []
    async with EventPublisher(kafka, "t") as pub:

        async def send(n: int, tag: str) -> None:
            for i in range(n):
                event = a_request(f"{tag} {i}", session=f"{tag}-{i % 7}")
                sent.append(str(event.event_id))
                await pub.publish(topics.retrieval_requested, event)

        a = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        b = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        task_a = asyncio.create_task(a.run(stop_a))
        await asyncio.wait_for(a.ready.wait(), 30)
        await send(20, "first")
        task_b = asyncio.create_task(b.run(stop_b))
        await send(20, "during-join")
        await asyncio.wait_for(b.ready.wait(), 30)
        await send(20, "shared")
        stop_a.set()
        await asyncio.wait_for(task_a, 30)
        await send(20, "after-leave")
        try:
            await wait_caught_up(kafka, group, topics.retrieval_requested)
        finally:
            stop_b.set()
            await asyncio.wait_for(task_b, 30)
    outputs = await read_all(kafka, topics.retrieval_completed, expect=len(sent))
    causes = [str(EventDeserializer()(r.value).causation_id) for r in outputs]
    assert sorted(causes) == sorted(sent)  # every input answered, none twice


# --- records too large (issue 10, finding 1) ---------------------------------------------------------


def dlq(rec: ConsumerRecord[bytes, bytes], name: str) -> str | None:
    return header_value(list(rec.headers or ()), HEADER_DLQ_PREFIX + name)


async def test_an_original_too_large_to_republish_is_dead_lettered_truncated_and_the_next_is_answered(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    """A 1.1 MB record used to take the service down (the dead letter republished it whole: refused, exit)."""
    original = random.Random(1).randbytes(1_100_000)
    key = b"k" * 2_000
    headers = [("trace", b"abc"), ("x-big", b"h" * 20_000), ("ctxbus-dlq-reason", b"forged")]
    _, offset = await send_raw(kafka, topics.retrieval_requested, original, key=key, partition=0, headers=headers)
    good = a_request()
    await send_raw(kafka, topics.retrieval_requested, EventSerializer()(good), partition=0)
    service = settings.service.model_copy(update={"dead_letter_prefix_bytes": 1_000})
    async with EventPublisher(kafka, "t") as pub:
        runner = make_runner(
            settings.model_copy(update={"service": service}), kafka, topics, EchoHandler(topics), pub, metrics
        )
        await run_until_caught_up(runner, kafka, GROUP(settings), topics.retrieval_requested)

    (dead,) = await read_all(kafka, topics.dead_letter, expect=1)
    assert dead.value == original[:1_000]  # the configured prefix
    assert dead.key == key[:1_024]
    assert dlq(dead, "truncated") == "true"
    assert dlq(dead, "original-size") == "1100000"
    assert dlq(dead, "original-sha256") == hashlib.sha256(original).hexdigest()
    assert dlq(dead, "original-key-size") == "2000"
    assert dlq(dead, "original-headers-dropped") == "1"  # x-big; the forged reason is not kept either
    assert dlq(dead, "reason") == "oversize"
    assert dlq(dead, "error-class") == "OversizeEvent"
    assert (dlq(dead, "error-message") or "").startswith("oversize: event is 1100000 bytes, the limit is 1048576")
    assert dlq(dead, "original-offset") == str(offset)
    assert [h for h in dead.headers if not h[0].startswith(HEADER_DLQ_PREFIX)][:1] == [("trace", b"abc")]
    framed = decode_dead_letter(dict(dead.headers)[HEADER_DEAD_LETTER])  # the Avro record still decodes
    assert framed.error_class == "OversizeEvent" and framed.original_offset == offset
    (out,) = await read_all(kafka, topics.retrieval_completed, expect=1)
    assert EventDeserializer()(out.value).causation_id == good.event_id
    assert metrics.dead_letters.labels("echo", topics.retrieval_requested, "oversize")._value.get() == 1


class HugeOutputHandler(EchoHandler):
    """Answers the first request with a completion far over the record limit, the others normally."""

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        (out,) = await super().__call__(event)
        if self.calls > 1:
            return [out]
        assert isinstance(out.event.payload, RetrievalCompleted)
        item = RankedItem(id="big", project="p", kind="pattern", content="x" * 100_000, confidence=0.5, score=1.0)
        huge = out.event.payload.model_copy(update={"items": (item,) * 12})
        return [Output(out.topic, out.event.model_copy(update={"payload": huge}))]


async def test_an_output_over_the_limit_dead_letters_its_input_and_the_service_goes_on(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    first, second = a_request("one"), a_request("two")
    for event in (first, second):
        await send_raw(kafka, topics.retrieval_requested, EventSerializer()(event), partition=0)
    async with EventPublisher(kafka, "t") as pub:
        handler = HugeOutputHandler(topics)
        runner = make_runner(settings, kafka, topics, handler, pub, metrics)
        await run_until_caught_up(runner, kafka, GROUP(settings), topics.retrieval_requested)
    assert handler.calls == 2  # refused at once: no retry
    (dead,) = await read_all(kafka, topics.dead_letter, expect=1)
    assert dead.value == EventSerializer()(first)  # the input, whole
    assert dlq(dead, "reason") == "output_too_large" and dlq(dead, "error-class") == "RecordTooLarge"
    message = dlq(dead, "error-message") or ""
    assert f"{topics.retrieval_completed} is 1,2" in message and "the limit of 1,048,576 bytes" in message
    (out,) = await read_all(kafka, topics.retrieval_completed, expect=1)
    assert EventDeserializer()(out.value).causation_id == second.event_id


class LowLimitBroker(EventPublisher):
    """Sends as a broker whose topics take at most ``limit`` bytes answers (MESSAGE_TOO_LARGE): the embedded
    broker ignores max.message.bytes (measured), so this publisher refuses in its place, after the client."""

    def __init__(self, config: KafkaClientConfig, limit: int) -> None:
        super().__init__(config, "t")
        self.limit = limit
        self.refused = 0

    async def send(self, record: PreparedRecord) -> Any:
        if record.size > self.limit:
            self.refused += 1
            raise MessageSizeTooLargeError(f"{record.size} > {self.limit}")
        return await super().send(record)


async def test_a_dead_letter_refused_by_a_broker_with_a_lower_limit_is_sent_smaller(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    original = b"garbage" + random.Random(2).randbytes(60_000)
    _, offset = await send_raw(kafka, topics.retrieval_requested, original, partition=0)
    good = a_request()
    await send_raw(kafka, topics.retrieval_requested, EventSerializer()(good), partition=0)
    async with LowLimitBroker(kafka, limit=50_000) as pub:
        runner = make_runner(settings, kafka, topics, EchoHandler(topics), pub, metrics)
        await run_until_caught_up(runner, kafka, GROUP(settings), topics.retrieval_requested)
    assert pub.refused == 2  # the whole original, then its 60 KB prefix; the bare form fits
    (dead,) = await read_all(kafka, topics.dead_letter, expect=1)
    assert dead.value == b""
    assert dlq(dead, "truncated") == "true" and dlq(dead, "original-size") == str(len(original))
    assert dlq(dead, "original-sha256") == hashlib.sha256(original).hexdigest()
    assert dlq(dead, "reason") == "undecodable" and dlq(dead, "original-offset") == str(offset)
    assert len(await read_all(kafka, topics.retrieval_completed, expect=1)) == 1


class RefusesFirstOutput(EventPublisher):
    """A broker that refuses the first output's size (MESSAGE_TOO_LARGE on its acknowledgement)."""

    def __init__(self, config: KafkaClientConfig, topic: str) -> None:
        super().__init__(config, "t")
        self.topic = topic
        self.refused = 0

    async def enqueue(self, record: PreparedRecord) -> asyncio.Future[Any]:
        if record.topic == self.topic and not self.refused:
            self.refused += 1
            ack: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            ack.set_exception(MessageSizeTooLargeError(f"{record.size} > the broker's limit"))
            return ack
        return await super().enqueue(record)


async def test_an_output_the_broker_refuses_dead_letters_its_input_and_the_batch_goes_on(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics
) -> None:
    """Outputs are acknowledged after the batch is handled: a refusal still dead-letters its own input only."""
    first, second = a_request("one"), a_request("two")
    for event in (first, second):
        await send_raw(kafka, topics.retrieval_requested, EventSerializer()(event), partition=0)
    async with RefusesFirstOutput(kafka, topics.retrieval_completed) as pub:
        handler = EchoHandler(topics)
        runner = make_runner(settings, kafka, topics, handler, pub, metrics)
        await run_until_caught_up(runner, kafka, GROUP(settings), topics.retrieval_requested)
    assert pub.refused == 1 and handler.calls == 2
    (dead,) = await read_all(kafka, topics.dead_letter, expect=1)
    assert dead.value == EventSerializer()(first)
    assert dlq(dead, "reason") == "output_too_large" and dlq(dead, "error-class") == "MessageSizeTooLargeError"
    (out,) = await read_all(kafka, topics.retrieval_completed, expect=1)
    assert EventDeserializer()(out.value).causation_id == second.event_id


class PreparingHandler(EchoHandler):
    """Gets ready for the next events of a fetch, ``at_once`` at a time (as the retriever embeds the next
    requests' queries together)."""

    def __init__(self, topics: Topics, *, at_once: int = 5, fail: bool = False) -> None:
        super().__init__(topics)
        self.prepared: list[list[tuple[str, int]]] = []
        self.handled: list[str] = []
        self.ready: set[str] = set()
        self.unprepared: list[str] = []
        self.at_once = at_once
        self.fail = fail

    async def prepare(self, batch: Sequence[tuple[AnyEnvelope, int]]) -> int:
        self.prepared.append([(str(event.event_id), backlog) for event, backlog in batch])
        if self.fail:
            raise RuntimeError("the model is not there")
        self.ready.update(str(event.event_id) for event, _ in batch[: self.at_once])
        return self.at_once

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        event_id = str(event.event_id)
        self.handled.append(event_id)
        if event_id not in self.ready:
            self.unprepared.append(event_id)
        return await super().__call__(event)


@pytest.mark.parametrize("fail", [False, True], ids=["prepared", "preparation_fails"])
async def test_the_next_events_are_prepared_a_few_at_a_time_then_each_handled_in_order(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, metrics: Metrics, fail: bool
) -> None:
    events = [a_request(f"prompt {i}") for i in range(12)]
    async with EventPublisher(kafka, "t") as pub:
        for i, event in enumerate(events):
            await send_raw(kafka, topics.retrieval_requested, EventSerializer()(event), partition=0)
            if i == 5:  # poison and a repeat amid them: neither is prepared, both are dealt with in order
                await send_raw(kafka, topics.retrieval_requested, b"garbage bytes", partition=0)
                await send_raw(kafka, topics.retrieval_requested, EventSerializer()(events[0]), partition=0)
        handler = PreparingHandler(topics, fail=fail)
        await run_until_caught_up(
            make_runner(settings, kafka, topics, handler, pub, metrics),
            kafka,
            GROUP(settings),
            topics.retrieval_requested,
        )
    ids = [str(e.event_id) for e in events]
    assert handler.handled == ids  # every event once, in order, whether or not the preparation worked
    if fail:
        assert handler.unprepared == ids and len(handler.prepared) == len(ids) + 2  # asked again at each record
    else:
        assert handler.unprepared == []  # each was prepared before it was handled
        assert 1 < len(handler.prepared) < len(ids)  # a few at a time
        first = handler.prepared[0]
        assert str(events[0].event_id) not in [event_id for event_id, _ in first[1:]]  # the repeat is left out
        assert [backlog for _, backlog in first] == sorted((b for _, b in first), reverse=True)  # fewer behind each
    out = await read_all(kafka, topics.retrieval_completed, expect=len(ids))
    assert [str(EventDeserializer()(r.value).causation_id) for r in out] == ids
    assert len(await read_all(kafka, topics.dead_letter, expect=1)) == 1
