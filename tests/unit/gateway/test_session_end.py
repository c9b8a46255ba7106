"""A SessionEnd tells the retriever of the gateway's process to forget the session's task classifications
(issue 25: ``forget_session`` was called only by tests, so an ended session's entries stayed in the cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxbus.contract.payloads import OutcomeRecorded, TaskType
from ctxbus.contract.topics import Topics
from ctxbus.core.classify import Classification, SessionClassificationCache
from ctxbus.gateway.http import Request
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
from ctxbus.settings import HookSettings


class Publisher:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def publish(self, topic: str, event: Any) -> None:
        self.sent.append(event)


def hook(event: str, session: str, cwd: Path) -> Request:
    body = {"hook_event_name": event, "session_id": session, "cwd": str(cwd), "reason": "logout"}
    return Request("POST", "/v1/hooks", {}, json.dumps(body).encode())


async def test_a_session_end_forgets_the_sessions_classifications(tmp_path: Path) -> None:
    cache = SessionClassificationCache(capacity=8)
    classified = Classification(TaskType.BUGFIX, 0.9)
    cache.put("sess-1", "fix the login", classified)
    cache.put("sess-2", "fix the login", classified)
    publisher = Publisher()
    gateway = HookGateway(
        HookSettings(outcomes=False),
        Topics("t"),
        publisher,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        Metrics(),
        session_ended=cache.forget_session,
    )
    await gateway.handle(hook("Stop", "sess-1", tmp_path))
    assert len(cache) == 2  # a turn's end is not the session's
    response = await gateway.handle(hook("SessionEnd", "sess-1", tmp_path))
    assert response.status == 200
    assert len(cache) == 1 and cache.get("sess-2", "fix the login") is not None
    assert [type(e.payload) for e in publisher.sent] == [OutcomeRecorded]  # the outcome still goes out
