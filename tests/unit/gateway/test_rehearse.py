"""A silent gateway rehearses a prompt's way through it (``HookGateway.rehearse``): the body parsed and redacted,
its request built and encoded as the publisher would send it, nothing published, counted or rung."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.contract.topics import Topics
from ctxbus.gateway.path_tick import PathTick
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
from ctxbus.settings import HookSettings

from .test_arrival_ring import Rings, Router


class Publisher:
    def __init__(self) -> None:
        self.prepared: list[tuple[str, Any]] = []
        self.published: list[Any] = []

    def prepare(self, topic: str, event: Any) -> object:
        self.prepared.append((topic, event))
        return object()

    async def publish(self, topic: str, event: Any) -> None:
        self.published.append(event)


def test_a_rehearsal_builds_and_encodes_a_request_and_publishes_nothing(tmp_path: Path) -> None:
    rings, publisher, metrics = Rings(), Publisher(), Metrics()
    gateway = HookGateway(
        HookSettings(outcomes=False),
        Topics("t"),
        publisher,  # type: ignore[arg-type]
        Router(),  # type: ignore[arg-type]
        metrics,
        data_dir=tmp_path / "data",
        on_arrival=rings,
    )
    gateway.rehearse()
    gateway.rehearse()
    assert publisher.published == [] and rings.count == 0
    assert [topic for topic, _ in publisher.prepared] == [Topics("t").retrieval_requested] * 2
    event = publisher.prepared[0][1]
    assert isinstance(event.payload, RetrievalRequested) and "warm" in event.payload.prompt
    assert not any(s.value for m in metrics.gateway_requests.collect() for s in m.samples if s.name.endswith("_total"))


def test_the_tick_rehearses_after_a_silence_but_not_on_a_hooks_arrival() -> None:
    now, rehearsed = [0.0], []
    tick = PathTick(lambda: None, 15.0, lambda: now[0], rehearse=lambda: rehearsed.append(now[0]))
    tick.arrived()
    assert rehearsed == []
    now[0] = 15.0
    assert tick.tick()
    assert rehearsed == [15.0]
