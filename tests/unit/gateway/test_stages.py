"""A context hook's time is observed in its parts (``ctxbus_stage_seconds{service="gateway"}``): admitted
(parsed, redacted, identified), the previous turn's feedback, the request published, and the wait for its reply;
a hook whose reply never came observes no reply time."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, ContextSource, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.gateway.http import Request
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
from ctxbus.settings import HookSettings


class Publisher:
    async def publish(self, topic: str, event: Any) -> None:
        return None


class Router:
    def __init__(self, answers: bool) -> None:
        self.answers = answers

    def expect(self, correlation_id: uuid.UUID) -> None:
        return None

    def forget(self, correlation_id: uuid.UUID) -> None:
        return None

    async def wait(self, correlation_id: uuid.UUID, timeout_s: float) -> Envelope[ContextInjected]:
        if not self.answers:
            raise TimeoutError
        payload = ContextInjected(
            context_source=ContextSource.NONE,
            pattern_count=0,
            context_size_bytes=0,
            retrieval_duration_ms=1,
            agent_name="test",
            trigger=Trigger.USER_PROMPT,
            context="",
            context_chars=0,
            token_estimate=0,
        )
        return Envelope.root(payload, project="p", session_id="s", producer="test")


def stage_counts(metrics: Metrics) -> dict[str, float]:
    counts: dict[str, float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "ctxbus_stage_seconds_count" and sample.labels.get("service") == "gateway":
                counts[sample.labels["stage"]] = sample.value
    return counts


async def ask(tmp_path: Path, *, answers: bool) -> dict[str, float]:
    metrics = Metrics()
    gateway = HookGateway(
        HookSettings(outcomes=False),
        Topics("t"),
        Publisher(),  # type: ignore[arg-type]
        Router(answers),  # type: ignore[arg-type]
        metrics,
        data_dir=tmp_path / "data",
    )
    body = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": str(tmp_path), "prompt": "fix the login"}
    response = await gateway.handle(Request("POST", "/v1/hooks", {}, json.dumps(body).encode()))
    assert response.status == 200
    return stage_counts(metrics)


async def test_an_answered_prompt_observes_each_stage_once(tmp_path: Path) -> None:
    assert await ask(tmp_path, answers=True) == {"admit": 1, "feedback": 1, "publish": 1, "reply": 1}


async def test_a_prompt_whose_reply_never_came_observes_no_reply_time(tmp_path: Path) -> None:
    assert await ask(tmp_path, answers=False) == {"admit": 1, "feedback": 1, "publish": 1}
