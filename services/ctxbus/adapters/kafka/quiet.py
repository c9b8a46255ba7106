"""An idle consumer's sleep on the doorbell (``ctxbus.adapters.kafka.doorbell``): paused partitions until a
publisher of one of its topics rings, a check of the partitions' ends every fallback wait, and a short wake for a
warm ring (nothing published: the request path's fetches kept in use while the stack is idle)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

from ctxbus.adapters.kafka.doorbell import Doorbell

#: a warm ring's name is its topic's with this suffix (no Kafka topic name holds ``#``)
WARM_SUFFIX = "#warm"
#: how long a consumer woken by a warm ring fetches before it may sleep again (a few of its fetch waits)
WARM_AWAKE_S = 0.02


def warm_ring(topic: str) -> str:
    """The ring that wakes the consumers of ``topic`` for a moment only, with nothing published: the fetch path is
    used, so it stays warm (``ctxbus.gateway.path_tick``)."""
    return topic + WARM_SUFFIX


#: a sleeping consumer resumes and fetches after this many fallback checks that found nothing (Tansu reports a
#: partition's end short when its last batch holds several records: a batch of a producer that does not ring may be
#: invisible to the check, never to a fetch)
FULL_WAKE_EVERY = 4


class Quiet:
    """One consumer's idle waits: once it has found nothing for ``awake_s`` since its last records (or the ring that
    woke it), its partitions are paused (no fetch reaches the broker) until one of its topics rings. Each
    ``fallback_s`` without a ring it asks the broker once for its partitions' ends (records of a producer that does not
    ring are found there, and the answer tells that the broker still answers: ``answered_at``), and every
    ``full_wake_every`` such checks it resumes and fetches anyway. Under load it never sleeps: it fetches as a
    consumer without the doorbell does. A warm ring (:func:`warm_ring`) of one of its topics wakes it for
    ``warm_s`` only: a few fetches that keep its fetch path in use, then it sleeps again.

    The loop calls :meth:`busy` when a fetch (of ``linger_ms`` at most) got records, and :meth:`sleep` after one
    that brought nothing once :meth:`drowsy`. The sleep pauses, notes the rings so far, then asks the broker for the
    partitions' ends: records that came before are found there (no sleep), records after ring.
    """

    def __init__(
        self,
        bell: Doorbell,
        topics: tuple[str, ...],
        *,
        fallback_s: float,
        linger_ms: int,
        awake_s: float = 1.0,
        wake_on: tuple[str, ...] = (),
        full_wake_every: int = FULL_WAKE_EVERY,
        warm_s: float = WARM_AWAKE_S,
    ) -> None:
        """``wake_on``: topics upstream whose rings wake it too (the injector wakes when a request enters the
        pipeline, so it is fetching again by the time the retriever's answer comes, as without the doorbell)."""
        self._bell, self.topics = bell, topics
        self._ringing = (*topics, *(t for t in wake_on if t not in topics))
        #: the rings it sleeps on: its topics' and their warm rings
        self._listening = (*self._ringing, *(warm_ring(t) for t in self._ringing))
        self.fallback_s, self.linger_ms, self.awake_s, self.warm_s = fallback_s, linger_ms, awake_s, warm_s
        self.full_wake_every = max(1, full_wake_every)
        self._seen = self._seen_records = 0
        self._awake_until = 0.0
        #: when the broker last answered one of its checks (monotonic seconds; 0: never)
        self.answered_at = 0.0
        #: how the sleeps ended: ``rung`` (woken by a ring), ``warm`` (by a warm ring), ``fallback`` (the checks'
        #: limit, or the caller's timeout, passed) or ``behind`` (records were there already, or a check found them);
        #: ``checked``: checks after a fallback wait that found nothing (it slept on)
        self.woken: dict[str, int] = {"rung": 0, "warm": 0, "fallback": 0, "behind": 0, "checked": 0}
        bell.listen()

    def mark(self) -> None:
        self._seen = self._bell.rung(self._listening)
        self._seen_records = self._bell.rung(self._ringing)

    def busy(self) -> None:
        """Records came (or a ring): stay awake for ``awake_s`` more."""
        self._awake_until = time.monotonic() + self.awake_s

    def drowsy(self) -> bool:
        """Whether nothing came for ``awake_s``: the next empty fetch may end in :meth:`sleep`."""
        return time.monotonic() >= self._awake_until

    async def _behind(self, consumer: AIOKafkaConsumer, partitions: set[TopicPartition]) -> bool:
        behind = await _behind(consumer, partitions)
        if behind is not None:
            self.answered_at = time.monotonic()
        return bool(behind)

    async def sleep(
        self, consumer: AIOKafkaConsumer, stop: asyncio.Event | None = None, *, timeout_s: float | None = None
    ) -> bool:
        """Pause the consumer's partitions until a ring (True; a warm ring keeps it awake for ``warm_s`` only),
        records found by a check (True), the checks' limit or ``timeout_s`` or ``stop`` (False); the partitions are
        fetched again afterwards. Records that reached the
        broker before the pause (their ring came while the consumer was still fetching) are looked for first: then
        it does not sleep."""
        paused = consumer.assignment()
        consumer.pause(*paused)
        self.mark()  # from here on, a ring wakes it; what came before, the check below finds
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        stopping = asyncio.ensure_future(stop.wait()) if stop is not None else None
        try:
            if await self._behind(consumer, paused):
                self.woken["behind"] += 1
                self.busy()
                return True
            checks = 0
            while True:
                wait = self.fallback_s if deadline is None else min(self.fallback_s, deadline - time.monotonic())
                ring = asyncio.ensure_future(self._bell.wait(self._listening, self._seen, max(0.0, wait)))
                try:
                    await asyncio.wait({ring, *([stopping] if stopping else [])}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ring.cancel()
                if ring.done() and not ring.cancelled() and ring.result():
                    if self._bell.rung(self._ringing) > self._seen_records:  # records were published
                        self.woken["rung"] += 1
                        self.busy()
                    else:  # a warm ring only: a few fetches, then sleep again
                        self.woken["warm"] += 1
                        self._awake_until = time.monotonic() + self.warm_s
                    return True
                if stopping is not None and stopping.done():
                    return False
                checks += 1
                if checks >= self.full_wake_every or (deadline is not None and time.monotonic() >= deadline):
                    self.woken["fallback"] += 1
                    return False
                if await self._behind(consumer, paused):  # a producer that does not ring
                    self.woken["behind"] += 1
                    self.busy()
                    return True
                self.woken["checked"] += 1
        finally:
            if stopping is not None:
                stopping.cancel()
            still = consumer.assignment()  # a rebalance meanwhile: only what is still this consumer's
            consumer.resume(*(tp for tp in paused if tp in still))


async def _behind(consumer: AIOKafkaConsumer, partitions: set[TopicPartition]) -> bool | None:
    """Whether the broker holds records past the consumer's position in any of ``partitions`` (asked once); None
    when the broker did not answer (left to the next check)."""
    if not partitions:
        return False
    try:
        ends = await consumer.end_offsets(sorted(partitions))
        for tp in partitions:
            if ends.get(tp, 0) > await consumer.position(tp):
                return True
    except (
        KafkaError,
        OSError,
        AssertionError,
        IllegalStateError,
    ):  # unreachable, or the partition was revoked meanwhile
        return None
    return False
