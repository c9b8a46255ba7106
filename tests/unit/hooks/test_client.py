"""The lean hook client in process: every path prints valid hook output and exits 0."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading
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


@pytest.mark.parametrize(
    "argv", [[], [""], ["--help"], ["-x"], ["user-prompt"], ["USER-PROMPT-SUBMIT"], ["hook", "stop"], ["é\udcff"]]
)
def test_any_argument_answers_valid_output_and_exit_0(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, argv: list[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"{}")))
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    assert client.main(argv) == 0
    out, _ = capfdbinary.readouterr()
    assert json.loads(out) == {}


@pytest.mark.parametrize(
    "stdin", [b"[" * 100_000 + b"]" * 100_000, b'{"a": ' + b"{" * 100_000, b"\xff" * 10, b"", b"[]"]
)
def test_the_learned_patterns_contract_answers_any_input(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, stdin: bytes
) -> None:
    code, out, _ = run_client(monkeypatch, capfdbinary, tmp_path, "learned-patterns", stdin)
    assert code == 0 and out["success"] is (stdin == b"") and out["patterns_context"] == ""


@pytest.mark.parametrize("slug", ["user-prompt-submit", "session-start", "stop"])
@pytest.mark.parametrize("stdin", [b"[" * 100_000 + b"]" * 100_000, b'{"prompt": "\\ud800"', b"\xff\xfe{"])
def test_any_input_answers_valid_output_and_exit_0(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, slug: str, stdin: bytes
) -> None:
    code, out, _ = run_client(monkeypatch, capfdbinary, tmp_path, slug, stdin)
    assert code == 0
    assert out == ({} if slug == "stop" else client.output_for(client.EVENTS[slug], ""))


class Capture:
    """A listener that keeps the one request it gets and answers it with a valid hook answer."""

    def __init__(self, status: bytes = b"200 OK") -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = int(self.server.getsockname()[1])
        self.status = status
        self.head: dict[str, str] = {}
        self.body = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            self.head[name.strip().lower()] = value.strip()
        while len(body) < int(self.head.get("content-length", "0")):
            body += conn.recv(1 << 20)
        self.body = body
        answer = b'{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ok"}}'
        conn.sendall(b"HTTP/1.1 " + self.status + b"\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
        conn.close()
        self.server.close()


def run_against(
    monkeypatch: pytest.MonkeyPatch,
    capfdbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
    stdin: bytes,
    capture: Capture,
    **env: str,
) -> tuple[int, Any]:
    for key in [k for k in os.environ if k.startswith("CTXBUS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBUS_GATEWAY_URL", f"http://127.0.0.1:{capture.port}")
    monkeypatch.setenv("CTXBUS_HOOK_TIMEOUT_MS", "10000")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = client.main(["user-prompt-submit"])
    capture.thread.join(10)
    out, _ = capfdbinary.readouterr()
    return code, json.loads(out)


def prompt_json(prompt: str, event: str = "UserPromptSubmit") -> bytes:
    return json.dumps({"session_id": "s", "cwd": "/w", "hook_event_name": event, "prompt": prompt}).encode()


def test_the_client_sends_its_secret_project_and_cwd(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gateway.secret").write_text("the-secret\n")
    monkeypatch.chdir(tmp_path)
    capture = Capture()
    code, out = run_against(monkeypatch, capfdbinary, tmp_path, prompt_json("hi"), capture, CTXBUS_PROJECT="acme/w b")
    assert code == 0 and out["hookSpecificOutput"]["additionalContext"] == "ok"
    assert capture.head["authorization"] == "Bearer the-secret"
    assert capture.head["x-ctxbus-project"] == "acme/w%20b"
    assert capture.head["x-ctxbus-cwd"] == str(tmp_path)
    assert capture.head["x-ctxbus-hook-event"] == "UserPromptSubmit"
    assert capture.body == prompt_json("hi")  # small inputs go byte for byte


def test_a_refusal_is_logged_as_such_and_the_hook_still_answers(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    capture = Capture(b"401 Unauthorized")
    code, out = run_against(monkeypatch, capfdbinary, tmp_path, prompt_json("hi"), capture)
    assert code == 0 and out == client.output_for("UserPromptSubmit", "")
    logged = [json.loads(line) for line in (tmp_path / "data" / "hook.log").read_text().splitlines()]
    assert logged[0]["event"] == "gateway_refused" and logged[0]["status"] == 401


@pytest.mark.parametrize("size", [5_000_000, 20_000_000])
def test_a_prompt_over_4_mb_is_trimmed_before_posting_and_logged(
    monkeypatch: pytest.MonkeyPatch, capfdbinary: pytest.CaptureFixture[bytes], tmp_path: Path, size: int
) -> None:
    """Issue 10, finding 7: it was cut mid-JSON at 4 MB, and the hook got an empty context."""
    prompt = "fix the login " + "é" * (size // 2)
    capture = Capture()
    code, out = run_against(monkeypatch, capfdbinary, tmp_path, prompt_json(prompt, event="Stop"), capture)
    assert code == 0 and out["hookSpecificOutput"]["additionalContext"] == "ok"
    posted = json.loads(capture.body)
    assert posted["prompt"] == prompt[: client.MAX_PROMPT_CHARS] and posted["cwd"] == "/w"
    assert posted["hook_event_name"] == "UserPromptSubmit"  # the sub-command that ran, not the input's claim
    (logged,) = [json.loads(line) for line in (tmp_path / "data" / "hook.log").read_text().splitlines()]
    assert logged["event"] == "prompt_trimmed" and logged["kept"] == client.MAX_PROMPT_CHARS
    assert logged["cut"] is (size > client.MAX_READ_BYTES)
    assert logged["chars"] == (None if logged["cut"] else len(prompt))
