"""A doorbell for the embedded broker: publishers ring it, idle consumers sleep until it rings.

The embedded broker (Tansu) never wakes a waiting fetch: a consumer sees a record only at its next fetch, so
every consumer used to poll it every few milliseconds, and an idle stack burnt a good part of a core. With the
doorbell, a consumer that found nothing pauses its partitions (no fetch goes to the broker) and waits until a
publisher of one of its topics rings; then it resumes and fetches as before, until it has again found nothing for a
short while (its linger). Each fallback wait without a ring (``CTXBUS_KAFKA_DOORBELL_FALLBACK_MS``) it asks the
broker once for its partitions' ends: a record of a producer that does not ring (or whose ring was missed) is found
there, so that costs at most the fallback wait; every ``FULL_WAKE_EVERY`` checks it fetches anyway (what a check
cannot see: Tansu reports an end short after a batch of several records).

Rings reach every process of the stack: each process that consumes binds a unix datagram socket in one directory
per broker address (``bell_dir``: every ctxbus process talking to the same embedded broker finds the same one);
a publisher, once the broker has acknowledged a record, wakes the waiters of its own process directly and sends
the topic's name to every other socket of the directory (``ctxbus up``, its child process, and any CLI command
that publishes: ``ctxbus request``, ``memory import``). A real cluster wakes waiting fetches itself: there the
doorbell is off and consumers keep Kafka's own long polling.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import hashlib
import os
import select
import socket
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError

log = structlog.get_logger("ctxbus.doorbell")

#: the largest topic name a ring carries (Kafka's limit is 249 characters)
MAX_RING_BYTES = 512


def bell_dir(bootstrap_servers: str) -> Path:
    """The directory of the doorbell sockets of every process that talks to this broker (short: a unix socket's
    path has at most 107 bytes)."""
    key = hashlib.sha256(bootstrap_servers.strip().encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ctxbus-bells-{os.getuid()}" / key


class Doorbell:
    """One process's doorbell for one broker: counts rings per topic, wakes the waiters of any event loop."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._rung: dict[str, int] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._listener: socket.socket | None = None
        #: what reads the socket: an event loop's reader, or a thread
        self._reader: asyncio.AbstractEventLoop | threading.Thread | None = None
        self._path: Path | None = None
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._peers: tuple[int, list[str]] = (-1, [])

    # -- counting and waiting ---------------------------------------------------------------------------------
    def rung(self, topics: Iterable[str]) -> int:
        """How often the topics have rung so far (compare with a later count: a ring came meanwhile)."""
        with self._lock:
            return sum(self._rung.get(t, 0) for t in topics)

    async def wait(self, topics: tuple[str, ...], seen: int, timeout_s: float) -> bool:
        """Wait until the topics ring past ``seen`` (True) or ``timeout_s`` passes (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if sum(self._rung.get(t, 0) for t in topics) > seen:
                return True
            for t in topics:
                self._waiters.setdefault(t, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                for t in topics:
                    self._waiters.get(t, set()).discard(fut)

    def _rang(self, topic: str) -> None:
        with self._lock:
            self._rung[topic] = self._rung.get(topic, 0) + 1
            waiters = list(self._waiters.get(topic, ()))
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for fut in waiters:
            if fut.get_loop() is here:
                _wake(fut)
                continue
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
                fut.get_loop().call_soon_threadsafe(_wake, fut)

    # -- ringing --------------------------------------------------------------------------------------------
    def ring(self, topic: str) -> None:
        """A record of ``topic`` is on the broker: wake this process's waiters and tell every other process."""
        self._rang(topic)
        data = topic.encode()[:MAX_RING_BYTES]
        for name in self._peer_names():
            self._send(data, self.directory / name)

    def _peer_names(self) -> list[str]:
        """The other processes' sockets (listed again only when the directory changed)."""
        try:
            mtime = self.directory.stat().st_mtime_ns
        except OSError:
            return []
        if mtime != self._peers[0]:
            try:
                names = [n for n in os.listdir(self.directory) if n.endswith(".sock")]
            except OSError:
                names = []
            own = self._path.name if self._path is not None else None
            self._peers = (mtime, [n for n in names if n != own])
        return self._peers[1]

    def _send(self, data: bytes, path: Path) -> None:
        try:
            self._sender.sendto(data, str(path))
        except ConnectionRefusedError:  # nobody listens there: a process that died without removing it
            with contextlib.suppress(OSError):
                path.unlink()
        except OSError as exc:
            # gone meanwhile, or its queue is full (it has rings to read already): nothing is lost
            if exc.errno not in (errno.ENOENT, errno.EAGAIN, errno.ENOBUFS, errno.ECONNREFUSED):
                log.debug("doorbell_send_failed", path=str(path), error=repr(exc))

    # -- listening ------------------------------------------------------------------------------------------
    def listen(self) -> None:
        """Bind this process's socket (once), so the other processes' rings reach its waiters: read by the running
        event loop (no thread hands the ring over), or by a thread when there is none. A directory it cannot use
        is logged: the consumers then wake on this process's rings and the fallback wait only."""
        with self._lock:
            if self._listener is None:
                try:
                    self._listener, self._path = self._bind()
                except OSError as exc:  # the directory is not ours or not writable: rings of this process only
                    log.warning("doorbell_unbound", directory=str(self.directory), error=repr(exc))
                    return
            listener = self._listener
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            reader = self._reader
            if isinstance(reader, threading.Thread) or (
                isinstance(reader, asyncio.AbstractEventLoop) and reader.is_running()
            ):
                return  # read already (rings for a waiter of another loop reach it through that loop)
            if isinstance(reader, asyncio.AbstractEventLoop) and not reader.is_closed():
                with contextlib.suppress(RuntimeError, ValueError):
                    reader.remove_reader(listener.fileno())
            if loop is not None:
                loop.add_reader(listener.fileno(), self._drain, listener)
                self._reader = loop
                return
            self._reader = threading.Thread(target=self._receive, args=(listener,), name="ctxbus-doorbell", daemon=True)
        self._reader.start()

    def _bind(self) -> tuple[socket.socket, Path]:
        self.directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.directory.mkdir(exist_ok=True, mode=0o700)
        path = self.directory / f"{os.getpid()}.sock"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead process of the same pid left it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            listener.bind(str(path))
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        return listener, path

    def _drain(self, listener: socket.socket) -> None:
        """Every ring waiting on the socket (the event loop's reader)."""
        while True:
            try:
                data = listener.recv(MAX_RING_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # closed
                return
            if data:
                self._rang(data.decode(errors="replace"))

    def _receive(self, listener: socket.socket) -> None:
        """The thread's reader (no event loop ran when the process started listening)."""
        while True:
            try:
                readable, _, _ = select.select([listener], [], [], 1.0)  # a close is noticed
            except (OSError, ValueError):  # closed
                return
            if readable:
                self._drain(listener)
            if listener.fileno() < 0:
                return

    def close(self) -> None:
        """Stop listening and remove this process's socket."""
        with self._lock:
            listener, path, reader = self._listener, self._path, self._reader
            self._listener = self._path = self._reader = None
        if listener is not None:
            if isinstance(reader, asyncio.AbstractEventLoop) and not reader.is_closed():
                with contextlib.suppress(RuntimeError, ValueError):
                    reader.remove_reader(listener.fileno())
            listener.close()
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_bells: dict[tuple[int, str], Doorbell] = {}
_bells_lock = threading.Lock()


def doorbell_for(bootstrap_servers: str) -> Doorbell:
    """This process's doorbell for the broker (one per process and broker: a forked child makes its own)."""
    key = (os.getpid(), bootstrap_servers.strip())
    with _bells_lock:
        bell = _bells.get(key)
        if bell is None:
            bell = _bells[key] = Doorbell(bell_dir(bootstrap_servers))
        return bell


def close_all() -> None:
    """Remove this process's sockets (at exit)."""
    with _bells_lock:
        mine = [bell for (pid, _), bell in _bells.items() if pid == os.getpid()]
    for bell in mine:
        bell.close()


atexit.register(close_all)


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
    consumer without the doorbell does.

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
    ) -> None:
        """``wake_on``: topics upstream whose rings wake it too (the injector wakes when a request enters the
        pipeline, so it is fetching again by the time the retriever's answer comes, as without the doorbell)."""
        self._bell, self.topics = bell, topics
        self._ringing = (*topics, *(t for t in wake_on if t not in topics))
        self.fallback_s, self.linger_ms, self.awake_s = fallback_s, linger_ms, awake_s
        self.full_wake_every = max(1, full_wake_every)
        self._seen = 0
        self._awake_until = 0.0
        #: when the broker last answered one of its checks (monotonic seconds; 0: never)
        self.answered_at = 0.0
        #: how the sleeps ended: ``rung`` (woken by a ring), ``fallback`` (the checks' limit, or the caller's timeout,
        #: passed) or ``behind`` (records were there already, or a check found them); ``checked``: checks after a
        #: fallback wait that found nothing (it slept on)
        self.woken: dict[str, int] = {"rung": 0, "fallback": 0, "behind": 0, "checked": 0}
        bell.listen()

    def mark(self) -> None:
        self._seen = self._bell.rung(self._ringing)

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
        """Pause the consumer's partitions until a ring (True), records found by a check (True), the checks' limit
        or ``timeout_s`` or ``stop`` (False); the partitions are fetched again afterwards. Records that reached the
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
                ring = asyncio.ensure_future(self._bell.wait(self._ringing, self._seen, max(0.0, wait)))
                try:
                    await asyncio.wait({ring, *([stopping] if stopping else [])}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ring.cancel()
                if ring.done() and not ring.cancelled() and ring.result():
                    self.woken["rung"] += 1
                    self.busy()
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
