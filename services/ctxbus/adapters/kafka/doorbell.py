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
doorbell is off and consumers keep Kafka's own long polling. A consumer's sleep on it is
``ctxbus.adapters.kafka.quiet``.
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
from collections.abc import Iterable
from pathlib import Path

import structlog

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
