"""The consumer loop every service shares: consume -> handle -> produce -> commit.

The loop (fetch, commit, rebalance, readiness, lag) is here; each record's way through it (decode, handle with
retries, dead letters, send, settle) is ``processing``'s ``RecordProcessor``; what a handler and the loop agree on
(``Output``, ``Handler``, ``PoisonEvent``, ``RetriableError``, ``BACKLOG``, ``RECORD_HEADERS``) is ``handling``'s.

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
import time
from collections.abc import Sequence

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from ctxbus.adapters.kafka import broker_gone
from ctxbus.adapters.kafka.committer import Committer, SettledBatch
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.handling import BACKLOG, Handler
from ctxbus.adapters.kafka.inflight import Sent
from ctxbus.adapters.kafka.ledger import AnsweredLedger, recent_causes
from ctxbus.adapters.kafka.processing import RecordProcessor
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.quiet import Quiet
from ctxbus.adapters.kafka.schemas_topic import SchemaTopicReader
from ctxbus.adapters.kafka.sender import DeadLetterSender
from ctxbus.contract.serde import EventDeserializer
from ctxbus.observability import Metrics
from ctxbus.settings import ServiceSettings

log = structlog.get_logger("ctxbus.runner")

#: How many recent outputs per partition are read at start to rebuild the answered ledger.
LEDGER_WINDOW = 2_000
#: a consumer that heard nothing from the broker this long (plus the fallback wait, when it sleeps on the doorbell) is
#: not ready (the broker is unreachable)
BROKER_SILENCE_S = 15.0
#: how often an idle consumer asks the broker for metadata, to know it still answers
BROKER_PROBE_S = 5.0


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
        self._dlq = dead_letter_topic
        self._settings = settings
        self._metrics = metrics
        self._output_topics = tuple(output_topics)
        self._answered = AnsweredLedger()
        #: each record decoded, handled, its outputs sent and settled (it shares the answered ledger)
        self._records = RecordProcessor(
            name=name,
            topic=topic,
            expect_event_type=expect_event_type,
            handler=handler,
            publisher=publisher,
            letters=DeadLetterSender(
                publisher,
                dead_letter_topic,
                group=group_id,
                service=name,
                topic=topic,
                settings=settings,
                metrics=metrics,
            ),
            answered=self._answered,
            # whatever a ctxbus producer may send is decoded (a larger value is poison: ``oversize``)
            deserializer=deserializer or EventDeserializer(max_bytes=config.settings.max_record_bytes),
            schemas=schemas,
            settings=settings,
            metrics=metrics,
            answered_by=answered_by,
        )
        self._committer = Committer(name, self._records.settle, self._commit)
        self.ledger_stale = True
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
        decoded = {tp: [await self._records.try_decode(msg) for msg in records] for tp, records in batch.items()}
        flat = [event for events in decoded.values() for event in events]  # in handling order
        index = ready = 0  # the handler prepared the events before ``ready``
        in_flight: list[Sent] = []  # outputs sent as soon as handled; acknowledged before the commit
        for tp, records in batch.items():
            for msg, event in zip(records, decoded[tp], strict=True):
                if index >= ready:
                    ready = index + await self._records.prepare(flat[index:], waiting)
                waiting -= 1
                BACKLOG.set(waiting)
                sent = await self._records.process(msg, event)
                if sent is not None:
                    in_flight.append(sent)
                await self.progress.advance(tp.partition, msg.offset + 1)
                index += 1
        # settled and committed behind the loop, which fetches the next batch meanwhile (see committer)
        offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
        await self._committer.submit(SettledBatch(in_flight, offsets))
