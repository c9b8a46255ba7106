"""A broker known dead in this process (``ctxbus up``'s supervision of its embedded broker says so): nothing in flight
on it can be acknowledged or committed, so nothing may wait for it.

Without this, a round of ``up`` ending on a dead broker waited in its services' cleanup: a producer's stop (and a
consumer loop's last settle) waits for every record in flight until the producer's request timeout, retrying it on
the dead port meanwhile, and a consumer's last commit retries its dead coordinator for ever. When the broker at
``bootstrap`` died, :func:`mark_gone` fails every record in flight of every producer of this process on it (their
senders fail too: the producer is for a dead round and is stopped next), and the consumer loops drop their
uncommitted offsets instead of committing them (the records are read again from the archive's last snapshot of the
groups' positions). :func:`mark_back` forgets it once a new broker runs on the same address.
"""

from __future__ import annotations

import asyncio
import weakref

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError

_producers: weakref.WeakKeyDictionary[AIOKafkaProducer, str] = weakref.WeakKeyDictionary()
_gone: set[str] = set()
#: how long a producer's sender may take to end (its requests in flight fail at once on a dead port)
SENDER_STOP_S = 1.0


def register(producer: AIOKafkaProducer, bootstrap: str) -> None:
    """A producer of this process on ``bootstrap`` (held weakly: it goes when its publisher goes)."""
    _producers[producer] = bootstrap


async def mark_gone(bootstrap: str) -> int:
    """The broker at ``bootstrap`` died: stop every producer's sender on it (its requests in flight end first: on a
    dead port they fail at once), then fail every record it still holds; how many producers held some."""
    _gone.add(bootstrap)
    failed = 0
    for producer, address in list(_producers.items()):
        if address != bootstrap:
            continue
        sender = producer._sender.sender_task
        if sender is not None and not sender.done():
            sender.cancel()
            await asyncio.wait([sender], timeout=SENDER_STOP_S)
        accumulator = producer._message_accumulator
        failed += int(any(accumulator._batches.values()) or bool(accumulator._pending_batches))
        # after the sender: a batch failed while its request is in flight breaks the sender (KeyError on retry).
        # A batch sent before and queued again for a retry still has the callback that drops it from the pending
        # set once done: it goes back there first, or that callback fails (KeyError)
        queued = [b for batches in accumulator._batches.values() for b in batches]
        accumulator._pending_batches.update(b for b in queued if b._retry_count > 0)
        accumulator.fail_all(KafkaConnectionError(f"the broker at {bootstrap} died"))
        for batch in queued:  # a batch's drain waiter is awaited only by a send waiting for room: seen here
            if batch._drain_waiter.done():
                batch._drain_waiter.exception()
    return failed


def mark_back(bootstrap: str) -> None:
    """A new broker runs at ``bootstrap``."""
    _gone.discard(bootstrap)


def is_gone(bootstrap: str) -> bool:
    return bootstrap in _gone
