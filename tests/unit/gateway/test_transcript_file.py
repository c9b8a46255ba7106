"""Reading the transcript incrementally: every line once, torn lines later, the last turn without a cursor."""

from __future__ import annotations

import json
from pathlib import Path

from ctxbus.core.outcome_rules import CheckRun
from ctxbus.gateway import transcript_file

from .transcripts import FAIL, PASS, append, bash, prompt, result, say


def keys(read: transcript_file.TranscriptRead | None) -> list[str]:
    assert read is not None
    return [e.key for e in read.evidence if isinstance(e, CheckRun)]


def test_reads_continue_at_the_cursor_and_leave_a_torn_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append(path, prompt("a"), bash("t1"), result("t1", FAIL, 1))
    calls: dict[str, str] = {}
    first = transcript_file.read_since(str(path), 0, calls)
    assert keys(first) == ["t1"] and first is not None and first.cursor == path.stat().st_size
    torn = json.dumps(result("t2", PASS))
    append(path, bash("t2"))
    with path.open("a") as fh:
        fh.write(torn[:20])
    second = transcript_file.read_since(str(path), first.cursor, calls)
    assert keys(second) == [] and second is not None and second.cursor < path.stat().st_size
    with path.open("a") as fh:
        fh.write(torn[20:] + "\n")
    # the call was read before its result: both meet in the next read
    assert keys(transcript_file.read_since(str(path), second.cursor, calls)) == ["t2"] and calls == {}


def test_without_a_cursor_only_the_last_turn_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append(path, prompt("a"), bash("t1"), result("t1", FAIL, 1), say("x"), prompt("b"), bash("t2"), result("t2", PASS))
    read = transcript_file.read_since(str(path), None)
    assert keys(read) == ["t2"] and read is not None and read.partial
    assert keys(transcript_file.read_since(str(path), 10**9)) == ["t2"]  # a cursor past the end: same


def test_only_regular_jsonl_files_are_read(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert transcript_file.usable(str(tmp_path / "notes.txt")) is None
    assert transcript_file.usable(str(tmp_path / "missing.jsonl")) is None
    assert transcript_file.usable(str(tmp_path)) is None
    assert transcript_file.usable(None) is None
    assert transcript_file.read_since(None, 0) is None
    assert transcript_file.read_since(str(tmp_path / "gone.jsonl"), 0) is None


def test_has_answer(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append(path, prompt("a"))
    assert not transcript_file.has_answer(str(path))
    append(path, say("b"))
    assert transcript_file.has_answer(str(path))


def test_evidence_read_from_a_transcript_holds_no_secret(tmp_path: Path) -> None:
    """What the gateway keeps from a transcript (a check's command and output, the user's words) is redacted as
    it is read: outcome notes and session capture start from it."""
    path = tmp_path / "s.jsonl"
    token = "ghp_" + "Zx9Yw8Vu7Ts6" * 3
    append(
        path,
        prompt("a"),
        bash("t1", command=f"GITHUB_TOKEN={token} pytest -q"),
        result("t1", FAIL + f"\nE   AssertionError: login failed for postgres://app:Hunter2-pass@db/app {token}", 1),
    )
    read = transcript_file.read_since(str(path), 0, {})
    assert read is not None and read.evidence
    text = repr(read.evidence)
    assert token not in text and "Hunter2-pass" not in text
    assert "[REDACTED:github-token]" in text
