"""The dashboard's Kafka side: reads the injection and dead-letter topics into an :class:`Aggregator`.

Consumer group. The dashboard never joins the services' groups. It assigns itself every partition
of its topics (no group join: it starts in milliseconds, and two dashboards each see every event,
where members of one group would split the partitions between them) and keeps its position under
its own group id (``PREFIX.dashboard`` by default), committed every few seconds, so standard Kafka
tooling shows how far behind it is. Its state lives in memory: at start it rewinds ``backlog``
events per partition to fill the page, instead of resuming from the committed offsets.

Decoding uses the contract's serde. A message that does not decode (foreign bytes, unknown schema
id, invalid payload, a dead letter without its reason header) is skipped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.envelope import EventType
from ctxbus.contract.serde import (
    HEADER_DEAD_LETTER,
    EventDecodeError,
    EventDeserializer,
    decode_dead_letter,
)
from ctxbus.contract.topics import Topics
from ctxbus.dashboard.aggregate import Aggregator
from ctxbus.dashboard.rows import MAX_MESSAGE_CHARS, SkippedRow, dead_letter_row, injection_row

log = structlog.get_logger("ctxbus.dashboard.feed")

#: events per partition read again at start to fill the page
DEFAULT_BACKLOG = 500
#: how often positions are committed and partitions re-discovered (new topics, new partitions)
HOUSEKEEPING_S = 5.0
#: how stale the partition counts of the topics read may get (partitions added to a topic show up then)
METADATA_MAX_AGE_MS = 10_000
FETCH_TIMEOUT_MS = 200
MAX_RECORDS = 500


class _Rediscover(Exception):
    """A topic exists that this consumer's metadata does not know (its client tracks only what it reads)."""


@dataclass(slots=True)
class FeedStatus:
    """What the page says about the feed itself."""

    bootstrap_servers: str
    group_id: str
    topics: tuple[str, ...]
    connected: bool = False
    partitions: int = 0
    consumed: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "group_id": self.group_id,
            "topics": list(self.topics),
            "connected": self.connected,
            "partitions": self.partitions,
            "consumed": self.consumed,
            "lag": dict(self.lag),
            "error": self.error,
        }


class DashboardFeed:
    def __init__(
        self,
        config: KafkaClientConfig,
        topics: Topics,
        aggregator: Aggregator,
        *,
        group_id: str | None = None,
        backlog: int = DEFAULT_BACKLOG,
        on_update: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
        housekeeping_s: float = HOUSEKEEPING_S,
    ) -> None:
        self._config = config
        self._injected = topics.context_injected
        self._completed = topics.retrieval_completed
        self._dead = topics.dead_letter
        self._topics = (self._injected, self._completed, self._dead)
        #: per partition, the end offset when it was first assigned: what comes before is history (backlog)
        self._live_from: dict[TopicPartition, int] = {}
        self._aggregator = aggregator
        self._group = group_id or f"{topics.prefix}.dashboard"
        self._backlog = max(0, backlog)
        self._on_update = on_update
        self._clock = clock
        self._housekeeping_s = housekeeping_s
        self._deserialize = EventDeserializer()
        self._assigned: set[TopicPartition] = set()
        #: the next offset to read per partition (a reconnect or re-assignment resumes there)
        self._positions: dict[TopicPartition, int] = {}
        self.status = FeedStatus(config.bootstrap_servers, self._group, self._topics)
        #: set once every partition known at start is assigned and positioned
        self.ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop``; broker trouble is reported in the status and retried, never fatal."""
        while not stop.is_set():
            try:
                await self._consume(stop)
            except _Rediscover:
                continue  # positions are kept: the new consumer resumes where this one was
            except (KafkaError, OSError) as exc:
                self.status.connected = False
                self.status.error = f"{type(exc).__name__}: {exc}"
                log.warning("dashboard_feed_error", error=repr(exc))
                self._on_update()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)

    async def _consume(self, stop: asyncio.Event) -> None:
        options = {**self._config.consumer("dashboard", self._group), "metadata_max_age_ms": METADATA_MAX_AGE_MS}
        consumer = AIOKafkaConsumer(**options)
        await consumer.start()
        self._assigned = set()
        try:
            await self._assign(consumer)
            self.status.connected, self.status.error = True, None
            self.ready.set()
            self._on_update()
            next_housekeeping = time.monotonic() + self._housekeeping_s
            while not stop.is_set():
                if not self._assigned:  # the topics do not exist yet: look again shortly
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)
                    await self._assign(consumer)
                    continue
                fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=FETCH_TIMEOUT_MS, max_records=MAX_RECORDS))
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if fetch not in done:
                    fetch.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await fetch
                    break
                batch = fetch.result()
                count = sum(len(records) for records in batch.values())
                for records in batch.values():
                    for record in records:
                        self._ingest(record)
                if count:
                    self.status.consumed += count
                    await self._update_lag(consumer)
                    self._on_update()
                if time.monotonic() >= next_housekeeping:
                    next_housekeeping = time.monotonic() + self._housekeeping_s
                    await self._housekeeping(consumer)
        finally:
            with contextlib.suppress(KafkaError, OSError):
                await self._commit(consumer)
            await consumer.stop()
            self.status.connected = False

    async def _assign(self, consumer: AIOKafkaConsumer) -> None:
        """Assign every partition of the topics, new ones too (topics created later, added partitions).

        A new assignment forgets every position, so each partition is sought again: where it was (a
        reconnect or a re-assignment resumes there, nothing is counted twice), or ``backlog`` events
        back for a partition never seen."""
        existing = await consumer.topics()
        if any(t in existing and consumer.partitions_for_topic(t) is None for t in self._topics):
            raise _Rediscover  # a topic created since this consumer started: a new consumer knows it
        wanted = {
            TopicPartition(topic, p) for topic in self._topics for p in consumer.partitions_for_topic(topic) or ()
        }
        if not wanted - self._assigned:
            return
        fresh = sorted(tp for tp in wanted if tp not in self._positions)
        if fresh:
            begins = await consumer.beginning_offsets(fresh)
            ends = await consumer.end_offsets(fresh)
            for tp in fresh:
                self._positions[tp] = max(begins[tp], ends[tp] - self._backlog)
                self._live_from[tp] = ends[tp]
        consumer.assign(sorted(wanted))
        for tp in sorted(wanted):
            consumer.seek(tp, self._positions[tp])
        log.info(
            "dashboard_assigned", partitions=[f"{tp.topic}:{tp.partition}" for tp in sorted(wanted - self._assigned)]
        )
        self._assigned = wanted
        self.status.partitions = len(wanted)

    async def _housekeeping(self, consumer: AIOKafkaConsumer) -> None:
        await self._commit(consumer)
        await self._assign(consumer)
        await self._update_lag(consumer)

    async def _commit(self, consumer: AIOKafkaConsumer) -> None:
        """Best effort: the position under the dashboard's own group id (bookkeeping, not recovery)."""
        if not self._assigned:
            return
        try:
            await consumer.commit()
        except KafkaError as exc:
            log.info("dashboard_commit_failed", error=repr(exc))

    async def _update_lag(self, consumer: AIOKafkaConsumer) -> None:
        """Messages on the broker not yet read, per topic (the highwater the last fetch reported)."""
        lag: dict[str, int] = {}
        for tp in self._assigned:
            high = consumer.highwater(tp)
            if high is None:
                continue
            lag[tp.topic] = lag.get(tp.topic, 0) + max(0, high - await consumer.position(tp))
        self.status.lag = lag

    def _ingest(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """One message into the aggregator; whatever it is, the loop goes on."""
        self._positions[TopicPartition(record.topic, record.partition)] = record.offset + 1
        try:
            if record.topic == self._dead:
                self._dead_letter(record)
            elif record.topic == self._completed:
                completed = self._deserialize(record.value, expect=EventType.RETRIEVAL_COMPLETED)
                self._aggregator.inspections.add_completed(completed)  # type: ignore[arg-type]
            else:
                event = self._deserialize(record.value, expect=EventType.CONTEXT_INJECTED)
                tp = TopicPartition(record.topic, record.partition)
                backlog = record.offset < self._live_from.get(tp, 0)
                self._aggregator.add_injection(injection_row(event, self._clock(), backlog=backlog))  # type: ignore[arg-type]
                self._aggregator.inspections.add_injected(event)  # type: ignore[arg-type]
        except EventDecodeError as exc:
            self._skip(record, exc.reason, str(exc))
        except Exception as exc:  # a dashboard must not die on one odd message
            log.warning("dashboard_message_failed", topic=record.topic, offset=record.offset, error=repr(exc))
            self._skip(record, "unreadable", f"{type(exc).__name__}: {exc}")

    def _dead_letter(self, record: ConsumerRecord[bytes, bytes]) -> None:
        raw = next((v for k, v in record.headers or () if k == HEADER_DEAD_LETTER), None)
        if raw is None:
            self._skip(record, "no_dead_letter_header", f"no {HEADER_DEAD_LETTER} header")
            return
        try:
            reason = decode_dead_letter(raw)
        except Exception as exc:  # fastavro and the registry raise many types for corrupt bytes
            self._skip(record, "bad_dead_letter_header", f"{type(exc).__name__}: {exc}")
            return
        project = None
        with contextlib.suppress(EventDecodeError):
            project = self._deserialize(record.value).project  # the original bytes, when they still decode
        self._aggregator.add_dead_letter(dead_letter_row(reason, project))

    def _skip(self, record: ConsumerRecord[bytes, bytes], reason: str, detail: str) -> None:
        self._aggregator.add_skipped(
            SkippedRow(
                at=self._clock(),
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                reason=reason,
                detail=detail[:MAX_MESSAGE_CHARS],
            )
        )
