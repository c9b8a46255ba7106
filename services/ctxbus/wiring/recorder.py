"""The recorder's consumer loop: every injection kept in the SQLite injection record."""

from __future__ import annotations

from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.contract.envelope import EventType
from ctxbus.contract.topics import Topics
from ctxbus.recorder.handler import RecorderHandler
from ctxbus.wiring.resources import Resources, RunnerSpec


def recorder_runners(res: Resources, topics: Topics) -> list[RunnerSpec]:
    """The recorder's loop (its injection record opened into ``res`` unless it is there)."""
    s = res.settings
    if res.record is None:
        res.record = InjectionRecord(s.record_db)
    return [
        RunnerSpec(
            "recorder",
            RecorderHandler(res.record, res.metrics),
            topics.context_injected,
            EventType.CONTEXT_INJECTED,
            background=True,
        )
    ]
