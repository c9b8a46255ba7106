"""What a consumer loop and its handler agree on: the handler's signature (``Handler``: an event in, ``Output``s
out), the failures it raises (``RetriableError``: try again; ``PoisonEvent``: dead-letter it) and what the loop tells
it while it handles a record (``BACKLOG``, ``RECORD_HEADERS``). Services import these, never the loop
(``ctxbus.adapters.kafka.runner``) itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from ctxbus.contract.envelope import AnyEnvelope

#: How many records wait behind the one being handled (the rest of the batch and what the broker holds beyond
#: it), set by the loop for its handler: the retriever sheds load with it (ctxbus.retriever.expiry).
BACKLOG: ContextVar[int] = ContextVar("ctxbus_backlog", default=0)


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
