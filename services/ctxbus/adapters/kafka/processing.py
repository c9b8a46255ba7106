"""One record's way through a consumer loop (``ctxbus.adapters.kafka.runner``), from its bytes to its settled outputs.

- decoded (a schema id of a newer producer is looked up on the schemas topic first); undecodable: a dead letter;
- offered to a handler that prepares (``BatchPreparer``) with the next events of the fetch;
- skipped when already answered (the answered ledger), else handled with the record's headers in
  ``RECORD_HEADERS``: a retriable failure is retried with backoff a bounded number of times, a poison event or any
  other failure is dead-lettered with its reason;
- its outputs sized before any is sent (one over the record limit dead-letters the input), marked with the loop's
  ``answered_by``, and handed to the producer without waiting;
- settled (``settle``, called by the committer): every output acknowledged (a failed write sent again with retries;
  the broker's refusal of a size dead-letters the input), then counted as processed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

import structlog
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.handling import RECORD_HEADERS, Handler, Output, PoisonEvent, RetriableError
from ctxbus.adapters.kafka.inflight import Sent
from ctxbus.adapters.kafka.ledger import HEADER_ANSWERED_BY, AnsweredLedger
from ctxbus.adapters.kafka.limits import RecordTooLarge
from ctxbus.adapters.kafka.prepare import BatchPreparer, fetch_batch
from ctxbus.adapters.kafka.publisher import EventPublisher, PreparedRecord
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader, newer_schema_message
from ctxbus.adapters.kafka.sender import DeadLetterSender, backoff_s
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.registry import default_registry
from ctxbus.contract.serde import EventDecodeError, EventDeserializer, UnknownSchemaId, unframe
from ctxbus.observability import Metrics
from ctxbus.settings import ServiceSettings

log = structlog.get_logger("ctxbus.runner")


class RecordProcessor:
    """The records of one consumer loop, decoded, handled and sent; it shares the loop's answered ledger."""

    def __init__(
        self,
        *,
        name: str,
        topic: str,
        expect_event_type: str,
        handler: Handler,
        publisher: EventPublisher,
        letters: DeadLetterSender,
        answered: AnsweredLedger,
        deserializer: EventDeserializer,
        schemas: SchemaTopicReader | None,
        settings: ServiceSettings,
        metrics: Metrics,
        answered_by: str | None,
    ) -> None:
        self.name = name
        self._topic = topic
        self._expect = expect_event_type
        self._handler = handler
        self._publisher = publisher
        self._letters = letters
        self._answered = answered
        self._deserialize = deserializer
        #: where schema ids of newer producers are looked up before a record is called undecodable
        self._schemas = schemas
        self._settings = settings
        self._metrics = metrics
        self._answered_by = answered_by
        self._outputs_sent = 0

    async def try_decode(self, msg: ConsumerRecord[bytes, bytes]) -> AnyEnvelope | EventDecodeError:
        try:
            return await self._decode(msg)
        except EventDecodeError as exc:
            return exc

    async def prepare(self, events: list[AnyEnvelope | EventDecodeError], waiting: int) -> int:
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

    async def process(self, msg: ConsumerRecord[bytes, bytes], event: AnyEnvelope | EventDecodeError) -> Sent | None:
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

    async def settle(self, sent: Sent) -> None:
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
