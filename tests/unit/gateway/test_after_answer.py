"""Capture runs after the hook's answer: the gateway's response carries the work, the HTTP server runs it once the
answer is written and the connection closed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ctxbus.contract.topics import Topics
from ctxbus.gateway.capture import SessionCapture
from ctxbus.gateway.http import HttpServer, Request, Response
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
from ctxbus.settings import CaptureSettings, HookSettings

from .test_session_capture import Recorder, repo, session_file


async def test_the_server_runs_the_after_work_once_the_answer_is_out() -> None:
    order: list[str] = []

    async def handler(request: Request) -> Response:
        return Response(200, {"ok": True}, after=lambda: order.append("after"))

    server = HttpServer(handler, host="127.0.0.1", port=0, max_body=1000)
    port = await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        answer = await reader.read()
        order.append("answered")
        writer.close()
        for _ in range(100):
            if "after" in order:
                break
            await asyncio.sleep(0.01)
    finally:
        await server.stop()
    assert b"200" in answer.split(b"\r\n")[0] and order.count("after") == 1


async def test_a_stop_hook_answers_at_once_and_hands_its_input_to_capture(tmp_path: Path) -> None:
    root = repo(tmp_path)
    path = session_file(root)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings())  # type: ignore[arg-type]
    gateway = HookGateway(
        HookSettings(outcomes=False),
        Topics("t"),
        recorder,
        None,
        Metrics(),
        capture=capture,  # type: ignore[arg-type]
    )
    body = {"hook_event_name": "Stop", "session_id": "s1", "cwd": str(root), "transcript_path": str(path)}
    response = await gateway.handle(Request("POST", "/v1/hooks", {}, json.dumps(body).encode()))
    assert response.body == {} and response.after is not None and recorder.events == []  # nothing captured yet
    response.after()
    await capture.idle()
    await capture.close()
    assert recorder.rules() == ["failure_fix", "episode"]


async def test_without_capture_the_answer_carries_no_work(tmp_path: Path) -> None:
    root = repo(tmp_path)
    gateway = HookGateway(HookSettings(outcomes=False), Topics("t"), Recorder(), None, Metrics())  # type: ignore[arg-type]
    body = {"hook_event_name": "Stop", "session_id": "s1", "cwd": str(root)}
    response = await gateway.handle(Request("POST", "/v1/hooks", {}, json.dumps(body).encode()))
    assert response.after is None
