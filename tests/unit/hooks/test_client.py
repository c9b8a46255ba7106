"""The lean hook client in process: every path prints valid hook output and exits 0."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxbus.hooks import client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_client(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, slug: str, stdin: bytes
) -> tuple[int, Any, bytes]:
    for key in [k for k in os.environ if k.startswith("CTXBUS_") and k != "CTXBUS_HOOK_ENABLED"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBUS_GATEWAY_URL", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin))
    monkeypatch.setattr(sys, "stdin", fake_stdin)
    code = client.main([slug])
    out, err = capfdbinary.readouterr()
    return code, json.loads(out) if out else None, err


def test_an_unknown_hook_name_still_exits_0_with_valid_output(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    # Claude Code treats exit 2 as "block": a typo or an older ctxbus must never block the session
    code, out, err = run_client(monkeypatch, capfdbinary, tmp_path, "no-such-hook", b"{}")
    assert code == 0 and out == {}
    assert b"unknown hook" in err


BASH_RESULT = json.dumps(
    {
        "session_id": "s1",
        "transcript_path": "/nonexistent/s1.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -q"},
        "tool_response": {"stdout": "1 failed, 3 passed in 0.2s", "stderr": "", "interrupted": False},
        "tool_use_id": "toolu_1",
    }
).encode()


@pytest.mark.parametrize("slug", ["post-tool-use", "post-tool-use-failure", "stop", "session-end"])
@pytest.mark.parametrize("stdin", [BASH_RESULT, b"", b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_outcome_hooks_answer_empty_json_when_the_gateway_is_down(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, slug: str, stdin: bytes
) -> None:
    code, out, _ = run_client(monkeypatch, capfdbinary, tmp_path, slug, stdin)
    assert code == 0 and out == {}
    assert "gateway_unreachable" in (tmp_path / "data" / "hook.log").read_text()


def test_disabled_hooks_answer_at_once(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    monkeypatch.setenv("CTXBUS_HOOK_ENABLED", "false")
    code, out, _ = run_client(monkeypatch, capfdbinary, tmp_path, "post-tool-use", BASH_RESULT)
    assert code == 0 and out == {}
