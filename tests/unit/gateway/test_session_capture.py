"""The gateway's session capture: what it publishes after a hook answered, once per change, and when it is off.

The publisher records what it is given (the broker path: tests/integration/test_capture_hooks.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryUpserted
from ctxbus.contract.topics import Topics
from ctxbus.gateway.capture import SessionCapture, excluded
from ctxbus.settings import CaptureSettings

from ..capture.transcript_builder import PYTEST_FAIL, PYTEST_PASS, Transcript

PROJECT = "acme/web"


class Recorder:
    def __init__(self) -> None:
        self.events: list[Envelope[MemoryUpserted]] = []

    def prepare(self, topic: str, event: Envelope[MemoryUpserted]) -> Envelope[MemoryUpserted]:
        assert topic == "t.memory.upserted.v1"
        return event

    async def send(self, record: Envelope[MemoryUpserted]) -> None:
        self.events.append(record)

    def rules(self) -> list[str]:
        return [i.provenance.rule for e in self.events for i in e.payload.items if i.provenance]


def repo(tmp_path: Path, **config: Any) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ctxbus.json").write_text(json.dumps({"project": PROJECT, **config}))
    (tmp_path / "acme" / "auth").mkdir(parents=True)
    (tmp_path / "acme" / "auth" / "reset.py").write_text("token.mark_used()\n")
    return tmp_path


def session_file(root: Path) -> Path:
    t = (
        Transcript("s1", cwd=str(root))
        .prompt("reset links can be reused, fix it")
        .bash("pytest tests/auth -q", PYTEST_FAIL, code=1)
        .edit("acme/auth/reset.py", "user.set_password(new)", "user.set_password(new)\ntoken.mark_used()")
        .bash("pytest tests/auth -q", PYTEST_PASS)
        .say("Fixed: reset tokens are single use.")
    )
    path = root / "s1.jsonl"
    path.write_bytes(t.data())
    return path


def stop(root: Path, path: Path, event: str = "Stop") -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": "s1", "cwd": str(root), "transcript_path": str(path)}


async def run(capture: SessionCapture, *inputs: dict[str, Any]) -> None:
    for hook_input in inputs:
        capture.after_answer(str(hook_input["hook_event_name"]), hook_input)
    await capture.idle()
    await capture.close()


async def test_a_stop_publishes_the_lessons_once_with_file_hashes(tmp_path: Path) -> None:
    root = repo(tmp_path)
    path = session_file(root)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings())  # type: ignore[arg-type]
    await run(capture, stop(root, path), stop(root, path, "SessionEnd"))
    assert recorder.rules() == ["failure_fix", "episode"]  # the SessionEnd re-capture sent nothing unchanged
    assert capture.results == {"published": 1, "nothing_new": 1}
    (fix,) = [i for i in recorder.events[0].payload.items if i.provenance and i.provenance.rule == "failure_fix"]
    assert fix.project == PROJECT and fix.source == "captured" and fix.provenance.hook_event == "Stop"
    assert (
        fix.files[0].path == "acme/auth/reset.py" and fix.files[0].sha256 is not None and len(fix.files[0].sha256) == 64
    )


async def test_a_project_that_says_capture_false_captures_nothing(tmp_path: Path) -> None:
    root = repo(tmp_path, capture=False)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings())  # type: ignore[arg-type]
    await run(capture, stop(root, session_file(root)))
    assert recorder.events == [] and capture.results == {"off_for_project": 1}


async def test_an_excluded_path_captures_nothing(tmp_path: Path) -> None:
    root = repo(tmp_path)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings(exclude=f"{tmp_path}*"))  # type: ignore[arg-type]
    await run(capture, stop(root, session_file(root)))
    assert recorder.events == [] and capture.results == {"excluded_path": 1}


async def test_a_remember_prompt_is_stored_at_once(tmp_path: Path) -> None:
    root = repo(tmp_path)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings())  # type: ignore[arg-type]
    prompt = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s2",
        "cwd": str(root),
        "prompt": "remember: migrations go in db/migrations, one file per change",
    }
    await run(capture, prompt)
    assert recorder.rules() == ["remember"]
    assert recorder.events[0].payload.items[0].content == "migrations go in db/migrations, one file per change"


def test_capture_off_wants_nothing() -> None:
    capture = SessionCapture(Topics("t"), Recorder(), CaptureSettings(enabled=False))  # type: ignore[arg-type]
    assert not capture.wants("Stop")


def test_exclusion_globs_match_a_directory_and_what_is_under_it() -> None:
    assert excluded("/home/dev/secret-repo/src/a.py", ("/home/dev/secret-repo",))
    assert excluded("/home/dev/clients/acme", ("/home/dev/clients/*",))
    assert not excluded("/home/dev/web", ("/home/dev/clients/*",))


def test_the_switch_is_ctxbus_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBUS_CAPTURE", "off")
    monkeypatch.setenv("CTXBUS_CAPTURE_EXCLUDE", "/a/*,/b")
    settings = CaptureSettings()
    assert not settings.enabled and settings.exclude_globs == ("/a/*", "/b")


async def test_session_end_writes_the_lessons_back_when_asked_and_keeps_the_users_bytes(tmp_path: Path) -> None:
    root = repo(tmp_path)
    patterns = root / ".claude" / "learned_patterns.json"
    user = '{"version": "1.0.0",\n "patterns": [{"pattern_id": "mine", "description": "x",  "confidence": 0.9}]}\n'
    patterns.write_text(user)
    path = session_file(root)
    off = SessionCapture(Topics("t"), Recorder(), CaptureSettings(), patterns_file=".claude/learned_patterns.json")  # type: ignore[arg-type]
    await run(off, stop(root, path, "SessionEnd"))
    assert patterns.read_text() == user  # not asked: the file is the user's
    on = SessionCapture(  # type: ignore[arg-type]
        Topics("t"),
        Recorder(),
        CaptureSettings(write_patterns=True),
        patterns_file=".claude/learned_patterns.json",
    )
    await run(on, stop(root, path, "SessionEnd"))
    written = json.loads(patterns.read_text())
    mine, learned = written["patterns"]
    assert mine == {"pattern_id": "mine", "description": "x", "confidence": 0.9}
    assert patterns.read_text().startswith(user.rstrip("\n").rsplit("]}", 1)[0])  # the user's bytes, then ctxbus's
    assert learned["written_by"] == "ctxbus" and learned["example_reference"] == "acme/auth/reset.py"
    assert learned["pattern_id"].startswith("ctxbus-")  # the failure's fix: a learning; the episode stays out
    assert [p["pattern_id"] for p in written["patterns"]].count(learned["pattern_id"]) == 1
    await run(
        SessionCapture(  # type: ignore[arg-type]
            Topics("t"), Recorder(), CaptureSettings(write_patterns=True), patterns_file=".claude/learned_patterns.json"
        ),
        stop(root, path, "SessionEnd"),
    )
    assert json.loads(patterns.read_text()) == written  # the same session again: nothing new


def test_a_pattern_file_ctxbus_cannot_read_is_left_as_it_is(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from ctxbus.gateway.pattern_writer import write_learned
    from ctxbus.memory.model import MemoryItem, MemoryKind

    root = repo(tmp_path)
    patterns = root / ".claude" / "learned_patterns.json"
    patterns.write_text("{not json")
    lesson = MemoryItem(id="l", project=PROJECT, kind=MemoryKind.LEARNING, content="reset tokens are single use")
    assert write_learned(str(root), ".claude/learned_patterns.json", [lesson], datetime.now(UTC)) == 0
    assert patterns.read_text() == "{not json"
    fresh = tmp_path / "other"
    (fresh / ".git").mkdir(parents=True)
    assert write_learned(str(fresh), ".claude/learned_patterns.json", [lesson], datetime.now(UTC)) == 1
    assert json.loads((fresh / ".claude" / "learned_patterns.json").read_text())["patterns"][0]["pattern_id"] == (
        "ctxbus-l"
    )


async def test_capture_waits_its_delay_after_the_answer_before_it_reads_anything(tmp_path: Path) -> None:
    """The hook's own process exits first: a capture started at once would share the CPU with it."""
    root = repo(tmp_path)
    path = session_file(root)
    recorder = Recorder()
    capture = SessionCapture(Topics("t"), recorder, CaptureSettings(delay_ms=10_000))  # type: ignore[arg-type]
    capture.after_answer("Stop", stop(root, path))
    with pytest.raises(TimeoutError):  # a capture that did not wait is done long before (a slow machine: later)
        await asyncio.wait_for(asyncio.shield(capture.idle()), 3.0)
    assert recorder.events == [] and capture.results == {}
    await capture.close()
    prompt = SessionCapture(Topics("t"), recorder, CaptureSettings(delay_ms=0))  # type: ignore[arg-type]
    await run(prompt, stop(root, path))
    assert recorder.rules() == ["failure_fix", "episode"]
