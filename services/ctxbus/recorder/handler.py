"""Recorder: keeps the record of injections and the injection metrics."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from ctxbus.adapters.injection_record import InjectionRecord, end_to_end_ms
from ctxbus.adapters.kafka.handling import Output, PoisonEvent
from ctxbus.contract.envelope import AnyEnvelope
from ctxbus.contract.payloads import ContextInjected
from ctxbus.observability import Metrics

log = structlog.get_logger("ctxbus.recorder")

SERVICE = "recorder"


class RecorderHandler:
    def __init__(self, record: InjectionRecord, metrics: Metrics) -> None:
        self._record = record
        self._metrics = metrics

    async def __call__(self, event: AnyEnvelope) -> Sequence[Output]:
        if not isinstance(event.payload, ContextInjected):
            raise PoisonEvent(f"the recorder takes context.injected events, not {event.event_type}")
        injected: ContextInjected = event.payload
        if not self._record.add(event):
            log.info("injection_already_recorded")
            return ()
        e2e = end_to_end_ms(event)
        if e2e is not None:
            self._metrics.end_to_end.labels(injected.trigger.value).observe(e2e / 1000.0)
        self._metrics.injection_chars.observe(injected.context_chars)
        self._metrics.injections.labels(injected.trigger.value, str(not injected.item_ids).lower()).inc()
        log.info(
            "injection_recorded",
            project=event.project,
            items=len(injected.item_ids),
            chars=injected.context_chars,
            end_to_end_ms=e2e,
            empty_reason=injected.empty_reason,
        )
        return ()
