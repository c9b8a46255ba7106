"""A hook that asks for context rings the request path awake as soon as it arrives, before its request is built
and published (the embedded broker's doorbell: ``on_arrival``); other hooks do not, and a failing ring never costs
the hook its answer."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ctxbus.contract.topics import Topics
from ctxbus.gateway.http import Request
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
from ctxbus.settings import HookSettings


class Rings:
    def __init__(self, fail: bool = False) -> None:
        self.count = 0
        self.fail = fail

    def __call__(self) -> None:
        self.count += 1
        if self.fail:
            raise OSError("the bell's directory is gone")


class Publisher:
    def __init__(self, rings: Rings) -> None:
        self.rings = rings
        #: how many rings had come when each event was published
        self.rung_before: list[int] = []

    async def publish(self, topic: str, event: Any) -> None:
        self.rung_before.append(self.rings.count)


class Router:
    """Nothing answers: the hook falls back at once."""

    def expect(self, correlation_id: uuid.UUID) -> None:
        return None

    def forget(self, correlation_id: uuid.UUID) -> None:
        return None

    async def wait(self, correlation_id: uuid.UUID, timeout_s: float) -> Any:
        raise TimeoutError


def hook(event: str, cwd: Path) -> Request:
    body = {"hook_event_name": event, "session_id": "s", "cwd": str(cwd), "prompt": "fix the login", "tool_name": "x"}
    return Request("POST", "/v1/hooks", {}, json.dumps(body).encode())


def gateway(rings: Rings, publisher: Publisher, tmp_path: Path) -> HookGateway:
    return HookGateway(
        HookSettings(outcomes=False),
        Topics("t"),
        publisher,  # type: ignore[arg-type]
        Router(),  # type: ignore[arg-type]
        Metrics(),
        data_dir=tmp_path / "data",
        on_arrival=rings,
    )


async def test_a_prompt_rings_before_its_request_is_published(tmp_path: Path) -> None:
    rings = Rings()
    publisher = Publisher(rings)
    response = await gateway(rings, publisher, tmp_path).handle(hook("UserPromptSubmit", tmp_path))
    assert response.status == 200
    assert rings.count == 1
    assert publisher.rung_before == [1]  # the ring came first


async def test_hooks_that_ask_for_no_context_do_not_ring(tmp_path: Path) -> None:
    rings = Rings()
    hooks = gateway(rings, Publisher(rings), tmp_path)
    for event in ("PostToolUse", "Stop", "Notification"):
        assert (await hooks.handle(hook(event, tmp_path))).status == 200
    assert rings.count == 0


async def test_a_failing_ring_does_not_cost_the_hook_its_answer(tmp_path: Path) -> None:
    rings = Rings(fail=True)
    publisher = Publisher(rings)
    response = await gateway(rings, publisher, tmp_path).handle(hook("UserPromptSubmit", tmp_path))
    assert response.status == 200
    assert rings.count == 1 and len(publisher.rung_before) == 1  # the request was still published
