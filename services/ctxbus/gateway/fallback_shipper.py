"""Fallback injections to the bus: the spooled answers (:mod:`ctxbus.hooks.spool`) published as
``context.injected`` events once the bus takes them, each once.

``fallback_event`` makes the event of one spooled answer (pure): ``context_source`` is where the answer came
from (``persistence_file``: the gateway read the pattern file, the pipeline being late or down;
``fallback_static``: the hook client read it, the gateway being out of reach), or ``none`` with an
``empty_reason`` of ``fallback:<why>`` when the file had nothing to give. Its event id is derived from the
record's id, so an answer shipped twice (a crash between the broker's acknowledgement and the file's
removal) carries the same event id both times. An answer the gateway gave for a request keeps that
request's correlation id, so replay joins it to its request.

``FallbackShipper`` runs in the gateway: it ships whatever is spooled when it starts, when the gateway has
just spooled an answer, and every ``interval_s``; an answer the bus refuses goes back to the spool for the
next round, one the contract refuses is set aside (``*.bad``).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MAX_PATTERN_COUNT, MAX_RETRIEVAL_MS, ContextInjected, ContextSource
from ctxbus.contract.topics import Topics
from ctxbus.core.tokens import estimate_tokens
from ctxbus.hooks import spool
from ctxbus.hooks.fallback import DEFAULT_MIN_CONFIDENCE
from ctxbus.hooks.requests import AGENT_NAME, CONTEXT_EVENTS

log = structlog.get_logger("ctxbus.gateway.fallback")

SERVICE = "gateway"
#: seconds between two looks at the spool (an answer the gateway spools itself is shipped at once)
SHIP_INTERVAL_S = 2.0
#: the prefix of a fallback's ``empty_reason`` when the pattern file had nothing to inject
FALLBACK_EMPTY = "fallback"


def fallback_event(entry: dict[str, Any]) -> Envelope[ContextInjected]:
    """The ``context.injected`` event of one spooled fallback answer.

    Raises ValueError (or KeyError/TypeError) for a record the contract cannot carry.
    """
    context = str(entry["context"])
    trigger = CONTEXT_EVENTS[str(entry["hook_event"])]
    source = ContextSource(entry["source"]) if context else ContextSource.NONE
    threshold = entry.get("min_confidence")
    payload = ContextInjected(
        context_source=source,
        pattern_count=min(max(0, int(entry["pattern_count"])), MAX_PATTERN_COUNT) if context else 0,
        context_size_bytes=len(context.encode("utf-8")),
        min_confidence_threshold=DEFAULT_MIN_CONFIDENCE if threshold is None else float(threshold),
        retrieval_duration_ms=min(max(0, int(entry["retrieval_ms"])), MAX_RETRIEVAL_MS),
        agent_name=AGENT_NAME,
        trigger=trigger,
        context=context,
        context_chars=len(context),
        token_estimate=estimate_tokens(context),
        empty_reason=None if context else f"{FALLBACK_EMPTY}:{entry['why']}",
    )
    correlation = entry.get("correlation_id")
    event = Envelope.root(
        payload,
        project=str(entry["project"]),
        session_id=str(entry["session_id"]),
        producer=SERVICE,
        now=datetime.fromtimestamp(float(entry["at"]), UTC),
        event_id=uuid.UUID(hex=str(entry["id"])),
        correlation_id=uuid.UUID(str(correlation)) if correlation else None,
    )
    cause = entry.get("causation_id")
    return event.model_copy(update={"causation_id": uuid.UUID(str(cause))}) if cause else event


class FallbackShipper:
    """Publishes the spooled fallback answers of ``data_dir`` (see the module docstring)."""

    def __init__(
        self, data_dir: Path, topics: Topics, publisher: EventPublisher, *, interval_s: float = SHIP_INTERVAL_S
    ) -> None:
        self._data_dir = str(data_dir)
        self._topics = topics
        self._publisher = publisher
        self._interval_s = interval_s
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Ship soon: an answer was just spooled."""
        self._wake.set()

    async def ship_once(self) -> int:
        """Publish what is spooled now; how many answers reached the bus."""
        claimed = await asyncio.to_thread(spool.claim, self._data_dir)
        sent = 0
        for index, (path, entry) in enumerate(claimed):
            try:
                event = fallback_event(entry)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("fallback_unshippable", path=path, error=repr(exc))
                spool.set_aside(path)
                continue
            try:
                await self._publisher.publish(self._topics.context_injected, event)
            except (KafkaError, OSError, TimeoutError) as exc:
                log.info("fallback_ship_deferred", waiting=len(claimed) - index, error=repr(exc))
                for rest, _ in claimed[index:]:
                    spool.release(rest)
                break
            spool.shipped(path)
            sent += 1
        if sent:
            log.info("fallback_shipped", events=sent)
        return sent

    async def run(self, stop: asyncio.Event) -> None:
        """Ship at the start, when woken and every interval, until ``stop``."""
        while not stop.is_set():
            try:
                await self.ship_once()
            except Exception:  # never the gateway's failure: the answers stay spooled
                log.exception("fallback_ship_failed")
            self._wake.clear()
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waits, timeout=self._interval_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
