"""The MCP HTTP listener admits what the gateway admits: no Origin, a loopback Host on its own port, the secret.
A refused request never reaches the MCP app; lifespan events always do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxbus.gateway.admission import Admission
from ctxbus.mcpserver.http import Admitted

SECRET = "s3cret-value"
PORT = 9471


class App:
    """The app behind the check: records what reached it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.seen.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})


async def call(app: Admitted, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)  # type: ignore[arg-type]
    return sent


def http(headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }


GOOD = {"host": f"127.0.0.1:{PORT}", "authorization": f"Bearer {SECRET}"}


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({"host": f"127.0.0.1:{PORT}"}, 401, "needs its secret"),
        ({**GOOD, "authorization": "Bearer wrong"}, 401, "wrong secret"),
        ({**GOOD, "origin": "https://evil.example"}, 403, "Origin"),
        ({**GOOD, "host": f"evil.example:{PORT}"}, 403, "loopback"),
        ({**GOOD, "host": "127.0.0.1:1"}, 403, "loopback"),  # another port: not this listener
    ],
)
async def test_a_refused_request_is_answered_and_never_reaches_the_app(
    headers: dict[str, str], status: int, says: str
) -> None:
    inner = App()
    sent = await call(Admitted(inner, Admission(SECRET, port=PORT)), http(headers))  # type: ignore[arg-type]
    assert sent[0]["status"] == status
    assert says in json.loads(sent[1]["body"])["error"]
    assert inner.seen == []


async def test_the_secret_on_a_loopback_host_is_admitted_and_lifespan_passes() -> None:
    inner = App()
    app = Admitted(inner, Admission(SECRET, port=PORT))  # type: ignore[arg-type]
    sent = await call(app, http(GOOD))
    assert sent[0]["status"] == 200
    await call(app, http({**GOOD, "authorization": "", "x-ctxbus-token": SECRET}))
    await call(app, {"type": "lifespan"})
    assert inner.seen == ["http", "http", "lifespan"]
