"""The consumer loop every service shares: consume -> handle -> produce -> commit.

- auto-commit off; a partition's offset is committed only after every output (or
  the dead letter) of the messages before it is acknowledged by the broker: the outputs
  of a batch are sent as each message is handled; their acknowledgements and the commit
  are awaited behind the loop, which fetches the next batch meanwhile (``committer``);
- retriable failures are retried with exponential backoff, a bounded number of times;
- poison (undecodable, unknown schema, invalid, oversize, or a handler that
  rejects it) goes to the dead-letter topic with the reason, and the loop goes on;
  an original too large to republish goes in the truncated form (prefix, size, sha256);
- an output over the record limit is never sent: its input is dead-lettered
  (``output_too_large``), and the loop goes on;
- an input already answered (redelivery after a crash or rebalance) is skipped;
- per-partition order is kept; a rebalance waits for the batch in flight;
- ``stop`` finishes the batch in flight, commits and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError, MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from ctxbus.adapters.kafka import broker_gone
from ctxbus.adapters.kafka.committer import Committer, SettledBatch
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.doorbell import Quiet
from ctxbus.adapters.kafka.inflight import Sent
from ctxbus.adapters.kafka.ledger import HEADER_ANSWERED_BY, AnsweredLedger, recent_causes
from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.prepare import BatchPreparer, fetch_batch
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.adapters.kafka.publisher import EventPublisher, PreparedRecord
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader, newer_schema_message
from ctxbus.adapters.kafka.sender import DeadLetterSender, backoff_s
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.registry import default_registry
from ctxbus.contract.serde import EventDecodeError, EventDeserializer, UnknownSchemaId, unframe
from ctxbus.observability import Metrics
from ctxbus.settings import ServiceSettings

log = structlog.get_logger("ctxbus.runner")

#: How many records wait behind the one being handled (the rest of the batch and what the broker holds beyond
#: it), set by the loop for its handler: the retriever sheds load with it (ctxbus.retriever.expiry).
BACKLOG: ContextVar[int] = ContextVar("ctxbus_backlog", default=0)
#: How many recent outputs per partition are read at start to rebuild the answered ledger.
LEDGER_WINDOW = 2_000
#: a consumer that heard nothing from the broker this long (plus the fallback wait, when it sleeps on the doorbell) is
#: not ready (the broker is unreachable)
BROKER_SILENCE_S = 15.0
#: how often an idle consumer asks the broker for metadata, to know it still answers
BROKER_PROBE_S = 5.0


@dataclass(frozen=True, slots=True)
class Output:
    topic: str
    event: AnyEnvelope


Handler = Callable[[AnyEnvelope], Awaitable[Sequence[Output]]]


#: the Kafka headers of the record whose event the handler is handling (a handler that heeds a producer's marker,
#: such as ctxbus.memory.global_scope's, reads them here; empty outside a handler)
RECORD_HEADERS: ContextVar[tuple[tuple[str, bytes], ...]] = ContextVar("ctxbus_record_headers", default=())


class RetriableError(Exception):
    """A transient failure: the same input may succeed if tried again."""


class PoisonEvent(Exception):
    """A decoded event the handler cannot process, ever: dead-letter it."""


class _Revoke(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runner: ConsumerRunner) -> None:
        self._runner = runner

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        # wait for the batch in flight: its offsets are committed before the partitions go
        async with self._runner.busy:
            await self._runner.committed()
            log.info("partitions_revoked", service=self._runner.name, partitions=[str(tp) for tp in revoked])

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # partitions may come from a member that died between produce and commit: before the next
        # batch, the loop learns what was already answered
        self._runner.ledger_stale = True
        log.info("partitions_assigned", service=self._runner.name, partitions=[str(tp) for tp in assigned])
        self._runner.ready.set()


class ConsumerRunner:
    def __init__(
        self,
        *,
        name: str,
        config: KafkaClientConfig,
        topic: str,
        group_id: str,
        handler: Handler,
        publisher: EventPublisher,
        dead_letter_topic: str,
        expect_event_type: str,
        settings: ServiceSettings,
        metrics: Metrics,
        output_topics: Sequence[str] = (),
        deserializer: EventDeserializer | None = None,
        schemas: SchemaTopicReader | None = None,
        background: bool = False,
        wake_on: Sequence[str] = (),
        progress: Progress | None = None,
        answered_by: str | None = None,
    ) -> None:
        """``background``: a consumer off the request path (it polls an idle broker less often); ``wake_on``:
        upstream topics whose doorbell rings wake it too (it is fetching by the time its input comes); ``progress``:
        where it tells how far it has handled each partition (read-your-writes waits on it: ctxbus.injector.fence);
        ``answered_by``: a loop in a group of its own beside others that answer the same inputs marks its outputs
        with it, and counts only those as its answers after a restart."""
        self._answered_by = answered_by
        self.progress = progress or Progress()
        self.name = name
        self._background = background
        self._wake_on = tuple(wake_on)
        self.busy = asyncio.Lock()
        self._config = config
        self._topic = topic
        self._group = group_id
        self._handler = handler
        self._publisher = publisher
        self._dlq = dead_letter_topic
        self._expect = expect_event_type
        self._settings = settings
        self._metrics = metrics
        self._output_topics = tuple(output_topics)
        # whatever a ctxbus producer may send is decoded (a larger value is poison: ``oversize``)
        self._deserialize = deserializer or EventDeserializer(max_bytes=config.settings.max_record_bytes)
        #: where schema ids of newer producers are looked up before a record is called undecodable
        self._schemas = schemas
        self._letters = DeadLetterSender(
            publisher, dead_letter_topic, group=group_id, service=name, topic=topic, settings=settings, metrics=metrics
        )
        self._answered = AnsweredLedger()
        self._committer = Committer(name, self._settle, self._commit)
        self.ledger_stale = True
        self._outputs_sent = 0
        self._consumer: AIOKafkaConsumer | None = None
        #: when the broker last answered this consumer (records, or a metadata probe), monotonic seconds
        self._broker_seen = time.monotonic()
        self._next_probe = 0.0
        #: set once the group has given this member its partitions (it can answer from then on)
        self.ready = asyncio.Event()
        #: its idle waits on the embedded broker's doorbell while it runs (None: it polls)
        self.quiet: Quiet | None = None

    def readiness(self) -> str | None:
        """None when this consumer can answer (it has its partitions and the broker answered lately), else
        why not (for ``/readyz``; called from another thread, so it only reads state)."""
        if self._consumer is None:
            return "stopped"
        if not self.ready.is_set():
            return "waiting for its partitions"
        silent_s = time.monotonic() - self._heard()
        # a sleeping consumer hears the broker at each check, one a fallback wait apart
        if silent_s > BROKER_SILENCE_S + (self.quiet.fallback_s if self.quiet is not None else 0.0):
            return f"no answer from the broker for {silent_s:.0f} s"
        return None

    def _heard(self) -> float:
        """When the broker last answered this consumer: records, a probe, or a sleeping consumer's check (monotonic)."""
        quiet = self.quiet
        return max(self._broker_seen, quiet.answered_at) if quiet is not None else self._broker_seen

    async def _probe_broker(self, consumer: AIOKafkaConsumer) -> None:
        """Every BROKER_PROBE_S without records (or a sleeping consumer's checks, which ask the broker too), a
        metadata request tells whether the broker answers."""
        now = time.monotonic()
        if now - self._heard() < BROKER_PROBE_S or now < self._next_probe:
            return
        self._next_probe = now + BROKER_PROBE_S
        try:
            await asyncio.wait_for(consumer.topics(), BROKER_PROBE_S)
        except (KafkaError, OSError, TimeoutError) as exc:
            log.warning("broker_probe_failed", service=self.name, error=repr(exc))
            return
        self._broker_seen = time.monotonic()

    async def _commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError(f"{self.name}: the consumer stopped before its offsets were committed")
        await consumer.commit(offsets)

    async def committed(self) -> None:
        """Wait until every batch handled so far has its outputs acknowledged and its offsets committed."""
        await self._committer.drain()

    async def refresh_ledger(self) -> None:
        """Add the causes on the tail of the output topics to the answered ledger."""
        self.ledger_stale = False
        if self._output_topics:
            causes = await recent_causes(self._config, self._output_topics, LEDGER_WINDOW, self._answered_by)
            self._answered.extend(causes)
            log.info("ledger_refreshed", service=self.name, answered=len(self._answered))

    async def run(self, stop: asyncio.Event) -> None:
        consumer = AIOKafkaConsumer(**self._config.consumer(self.name, self._group, background=self._background))
        consumer.subscribe([self._topic], listener=_Revoke(self))
        # the embedded broker never wakes a waiting fetch: idle, the partitions pause until a publisher rings
        quiet = self.quiet = self._config.quiet((self._topic,), background=self._background, wake_on=self._wake_on)
        await consumer.start()
        self._consumer = consumer
        log.info("service_started", service=self.name, topic=self._topic, group=self._group)
        try:
            while not stop.is_set():
                wait_ms = quiet.linger_ms if quiet is not None else 200
                fetch = asyncio.ensure_future(
                    consumer.getmany(timeout_ms=wait_ms, max_records=self._settings.max_batch)
                )
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if fetch not in done:
                    fetch.cancel()
                    stopping.cancel()
                    break
                stopping.cancel()
                batch = fetch.result()
                if batch:
                    async with self.busy:
                        if self.ledger_stale:
                            await self.refresh_ledger()
                        await self._process_batch(consumer, batch)
                    self._broker_seen = time.monotonic()
                await self._report_lag(consumer)
                await self._probe_broker(consumer)
                if quiet is not None:
                    if batch:
                        quiet.busy()
                    elif self.ready.is_set() and quiet.drowsy():
                        await quiet.sleep(consumer, stop)
        finally:
            async with self.busy:
                try:
                    if broker_gone.is_gone(self._config.bootstrap_servers):
                        await self._committer.abandon()  # nothing can be committed on a dead broker
                    else:
                        await self._committer.close()  # the batches in flight are committed before the consumer goes
                finally:
                    await consumer.stop()
            self._consumer = None
            log.info("service_stopped", service=self.name)

    async def _report_lag(self, consumer: AIOKafkaConsumer) -> None:
        """``ctxbus_consumer_lag``: per assigned partition, the highwater the last fetch reported minus the
        position (after the batch is processed: what is left to read). Unfetched partitions are skipped. The position
        is also the loop's progress there: every record before it is handled (just assigned: the committed offset)."""
        for tp in consumer.assignment():
            high = consumer.highwater(tp)
            if high is None:
                continue
            with contextlib.suppress(IllegalStateError):  # revoked meanwhile
                position = await consumer.position(tp)
                await self.progress.advance(tp.partition, position)
                self._metrics.consumer_lag.labels(self.name, tp.topic, str(tp.partition)).set(max(0, high - position))

    async def _process_batch(
        self, consumer: AIOKafkaConsumer, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]
    ) -> None:
        waiting = sum(len(r) for r in batch.values()) + sum(  # records from the next one on
            max(0, (consumer.highwater(tp) or 0) - records[-1].offset - 1) for tp, records in batch.items()
        )
        decoded = {tp: [await self._try_decode(msg) for msg in records] for tp, records in batch.items()}
        flat = [event for events in decoded.values() for event in events]  # in handling order
        index = ready = 0  # the handler prepared the events before ``ready``
        in_flight: list[Sent] = []  # outputs sent as soon as handled; acknowledged before the commit
        for tp, records in batch.items():
            for msg, event in zip(records, decoded[tp], strict=True):
                if index >= ready:
                    ready = index + await self._prepare(flat[index:], waiting)
                waiting -= 1
                BACKLOG.set(waiting)
                sent = await self._process(msg, event)
                if sent is not None:
                    in_flight.append(sent)
                await self.progress.advance(tp.partition, msg.offset + 1)
                index += 1
        # settled and committed behind the loop, which fetches the next batch meanwhile (see committer)
        offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
        await self._committer.submit(SettledBatch(in_flight, offsets))

    async def _try_decode(self, msg: ConsumerRecord[bytes, bytes]) -> AnyEnvelope | EventDecodeError:
        try:
            return await self._decode(msg)
        except EventDecodeError as exc:
            return exc

    async def _prepare(self, events: list[AnyEnvelope | EventDecodeError], waiting: int) -> int:
        """Let a handler that prepares get ready for the next events (``waiting``: records from the first on);
        returns how many of ``events`` to handle before asking again. Its failure is logged: each event is
        handled anyway."""
        if not isinstance(self._handler, BatchPreparer):
            return len(events)
        positions, batch = fetch_batch(events, waiting, self._answered)
        if not batch:
            return len(events)
        try:
            taken = await self._handler.prepare(batch)
        except Exception as exc:  # an optimisation only: the events are handled (and retried) one by one
            log.warning("prepare_failed", service=self.name, events=len(batch), error=repr(exc))
            return 1
        return len(events) if taken >= len(batch) else positions[max(0, taken - 1)]

    async def _process(self, msg: ConsumerRecord[bytes, bytes], event: AnyEnvelope | EventDecodeError) -> Sent | None:
        """Handle and send the outputs of one decoded message (not waiting for the broker): what was sent, or
        None when nothing was (a duplicate, a dead letter)."""
        started = time.perf_counter()
        if isinstance(event, EventDecodeError):
            await self._letters.send(msg, event, attempts=1, reason=event.reason)
            return None
        event_id = str(event.event_id)
        with structlog.contextvars.bound_contextvars(
            event_id=event_id,
            correlation_id=str(event.correlation_id),
            causation_id=str(event.causation_id),
            service=self.name,
        ):
            if event_id in self._answered:
                self._metrics.consumed.labels(self.name, self._topic, "duplicate").inc()
                log.info("duplicate_skipped", offset=msg.offset)
                return None
            headers = RECORD_HEADERS.set(tuple(msg.headers or ()))
            try:
                outputs = await self._handle_with_retries(msg, event)
            finally:
                RECORD_HEADERS.reset(headers)
            if outputs is None:
                return None
            sent = Sent(msg, event_id, str(event.correlation_id), started)
            try:  # every output is sized before any is sent
                sent.records = [self._publisher.prepare(out.topic, out.event) for out in outputs]
                if self._answered_by is not None:
                    mark = (HEADER_ANSWERED_BY, self._answered_by.encode())
                    sent.records = [
                        self._publisher.prepare_raw(r.topic, r.value, r.key, [*r.headers, mark]) for r in sent.records
                    ]
            except RecordTooLarge as exc:
                await self._letters.send(msg, exc, attempts=1, reason="output_too_large")
                return None
            for record in sent.records:
                sent.track(await self._enqueue(record))
            self._answered.add(event_id)  # a redelivery within this batch is a duplicate already
            return sent

    async def _enqueue(self, record: PreparedRecord) -> asyncio.Future[Any]:
        """The record handed to the producer: its acknowledgement (failed if it could not be handed over)."""
        try:
            return await self._publisher.enqueue(record)
        except KafkaError as exc:  # settled like a write the broker failed
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            failed.exception()  # seen here: it is raised where it is awaited (never, when the broker died)
            return failed

    async def _settle(self, sent: Sent) -> None:
        """Wait until every output of a message is acknowledged, then count it as processed (the broker's
        refusal of an output's size dead-letters the input)."""
        with structlog.contextvars.bound_contextvars(
            event_id=sent.event_id, correlation_id=sent.correlation_id, service=self.name
        ):
            for record, ack in zip(sent.records, sent.acks, strict=True):
                try:
                    await self._acknowledged(record, ack)
                except MessageSizeTooLargeError as exc:  # a broker's lower limit than ours
                    await self._letters.send(sent.msg, exc, attempts=1, reason="output_too_large")
                    return
                self._metrics.produced.labels(self.name, record.topic).inc()
            self._maybe_fault_exit(len(sent.records))
            self._metrics.consumed.labels(self.name, self._topic, "processed").inc()
            retried = any(a.cancelled() or a.exception() is not None for a in sent.acks)
            done = time.perf_counter() if retried else sent.acked_at
            self._metrics.processing.labels(self.name).observe(max(0.0, done - sent.started))
            log.debug("processed", offset=sent.msg.offset, outputs=len(sent.records))

    async def _acknowledged(self, record: PreparedRecord, ack: asyncio.Future[Any]) -> None:
        """Wait for an output's acknowledgement; a write the broker failed is sent again, with retries."""
        try:
            await ack
        except MessageSizeTooLargeError:
            raise  # the broker's limit: trying again cannot help
        except KafkaError as exc:
            log.warning("publish_failed", topic=record.topic, error=repr(exc))
            await self._letters.publish_with_retries(record)

    async def _decode(self, msg: ConsumerRecord[bytes, bytes]) -> AnyEnvelope:
        """The record's event; a schema id of a newer producer is looked up on the schemas topic first."""
        try:
            return self._deserialize(msg.value, expect=self._expect)
        except UnknownSchemaId:
            schema_id, _ = unframe(msg.value or b"")
            if self._schemas is not None and await self._schemas.resolve(schema_id):
                return self._deserialize(msg.value, expect=self._expect)
            registry = self._schemas.registry if self._schemas is not None else default_registry()
            message = newer_schema_message(schema_id, list(msg.headers or ()), registry)
            log.error("unknown_schema_id", schema_id=schema_id, topic=self._topic, offset=msg.offset, detail=message)
            raise UnknownSchemaId(message) from None

    async def _handle_with_retries(
        self, msg: ConsumerRecord[bytes, bytes], event: AnyEnvelope
    ) -> Sequence[Output] | None:
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._handler(event)
            except PoisonEvent as exc:
                await self._letters.send(msg, exc, attempts=attempts, reason="rejected")
                return None
            except (RetriableError, KafkaError, ConnectionError, TimeoutError) as exc:
                if attempts > self._settings.max_retries:
                    await self._letters.send(msg, exc, attempts=attempts, reason="retries_exhausted")
                    return None
                self._metrics.retries.labels(self.name).inc()
                delay = self._backoff(attempts)
                log.warning("handler_retry", attempt=attempts, delay_s=delay, error=repr(exc))
                await asyncio.sleep(delay)
            except Exception as exc:
                log.exception("handler_failed", offset=msg.offset)
                await self._letters.send(msg, exc, attempts=attempts, reason="handler_error")
                return None

    def _backoff(self, attempt: int) -> float:
        return backoff_s(self._settings, attempt)

    def _maybe_fault_exit(self, outputs: int) -> None:
        """Fault injection for crash tests: die hard after producing, before committing."""
        limit = self._settings.fault_exit_after_outputs
        if not limit:
            return
        self._outputs_sent += outputs
        if self._outputs_sent >= limit:
            log.warning("fault_exit", outputs=self._outputs_sent)
            os._exit(137)
