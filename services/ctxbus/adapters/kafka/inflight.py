"""The outputs of one partition's batch that were handed to the producer and are not acknowledged yet.

The consumer loop sends each message's outputs as soon as the handler returns them and goes on with the
next message; before it commits the partition's offset it waits until every one of them is acknowledged
(:meth:`RecordProcessor.settle`). So a batch costs one commit and a few produce requests, not two broker
round trips per message: a backlog of requests answered at once (expired) drains at the speed of reading.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.publisher import PreparedRecord


@dataclass(slots=True)
class Sent:
    """One input message whose outputs are on their way."""

    msg: ConsumerRecord[bytes, bytes]
    event_id: str
    correlation_id: str
    started: float  # time.perf_counter() when its handling began
    records: list[PreparedRecord] = field(default_factory=list)
    acks: list[asyncio.Future[Any]] = field(default_factory=list)
    #: when it was handled, then when its last output was acknowledged (time.perf_counter())
    acked_at: float = field(default_factory=time.perf_counter)

    def track(self, ack: asyncio.Future[Any]) -> None:
        """Wait for ``ack`` too, and note when it comes (its processing time ends with its last output's)."""
        self.acks.append(ack)
        ack.add_done_callback(self._acked)

    def _acked(self, ack: asyncio.Future[Any]) -> None:
        self.acked_at = time.perf_counter()
        if not ack.cancelled():
            ack.exception()  # seen: a failure is raised where it is awaited, or dropped with a dead broker's round
