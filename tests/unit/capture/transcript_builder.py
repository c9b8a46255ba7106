"""Claude Code transcripts written for tests, in the real JSON-lines shapes (see bench/data/outcomes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ctxbus.capture.engine import capture_transcript
from ctxbus.capture.items import SessionFacts
from ctxbus.memory.model import MemoryItem

CWD = "/home/dev/acme-web"
#: the clock every captured test item is stamped with
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class Transcript:
    def __init__(self, session_id: str = "sess-1", cwd: str = CWD) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.entries: list[dict[str, Any]] = []
        self._n = 0

    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self._n += 1
        self.entries.append(
            {
                "parentUuid": None,
                "isSidechain": False,
                "userType": "external",
                "cwd": self.cwd,
                "sessionId": self.session_id,
                "version": "2.0.27",
                "gitBranch": "main",
                "type": kind,
                "message": message,
                "uuid": f"u-{self._n}",
                "timestamp": f"2026-11-27T10:{self._n // 60:02d}:{self._n % 60:02d}.000Z",
                **extra,
            }
        )

    def prompt(self, text: str) -> Transcript:
        self._entry("user", {"role": "user", "content": text})
        return self

    def say(self, text: str) -> Transcript:
        self._entry("assistant", {"role": "assistant", "content": [{"type": "text", "text": text}]})
        return self

    def _tool(self, name: str, tool_input: dict[str, Any], content: str, result: Any, *, error: bool = False) -> None:
        tid = f"toolu_{self._n:04d}"
        self._entry(
            "assistant",
            {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}]},
        )
        self._entry(
            "user",
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": error}],
            },
            toolUseResult=result,
        )

    def bash(self, command: str, output: str, *, code: int = 0) -> Transcript:
        if code:
            text = f"Exit code {code}\n{output}"
            self._tool("Bash", {"command": command}, text, f"Error: {text}", error=True)
        else:
            self._tool("Bash", {"command": command}, output, {"stdout": output, "stderr": "", "interrupted": False})
        return self

    def edit(self, path: str, old: str, new: str) -> Transcript:
        full = f"{self.cwd}/{path}"
        self._tool(
            "Edit",
            {"file_path": full, "old_string": old, "new_string": new},
            f"The file {full} has been updated.",
            {"filePath": full, "oldString": old, "newString": new, "structuredPatch": []},
        )
        return self

    def write(self, path: str, content: str) -> Transcript:
        full = f"{self.cwd}/{path}"
        self._tool(
            "Write",
            {"file_path": full, "content": content},
            f"File created successfully at: {full}",
            {"type": "create", "filePath": full, "content": content},
        )
        return self

    def read(self, path: str) -> Transcript:
        full = f"{self.cwd}/{path}"
        self._tool(
            "Read", {"file_path": full}, "     1→...", {"type": "text", "file": {"filePath": full, "content": "..."}}
        )
        return self

    def interrupt(self) -> Transcript:
        self._entry("user", {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]})
        return self

    def summary_line(self, text: str) -> Transcript:
        self.entries.append({"type": "summary", "summary": text, "leafUuid": f"leaf-{self._n}"})
        return self

    def compact_summary(self, text: str) -> Transcript:
        body = f"This session is being continued from a previous conversation that ran out of context. {text}"
        self._entry("user", {"role": "user", "content": body}, isCompactSummary=True, isVisibleInTranscriptOnly=True)
        return self

    def meta(self, text: str) -> Transcript:
        self._entry("user", {"role": "user", "content": text}, isMeta=True)
        return self

    def data(self) -> bytes:
        return "".join(json.dumps(e) + "\n" for e in self.entries).encode()


PYTEST_FAIL = """..........F.                                                            [100%]
=================================== FAILURES ===================================
__________________________ test_link_is_single_use ____________________________
    def test_link_is_single_use(client, token):
>       assert resp.status_code == 410
E       assert 200 == 410
acme/auth/reset.py:42: TokenReused
=========================== short test summary info ============================
FAILED tests/auth/test_reset.py::test_link_is_single_use - assert 200 == 410
1 failed, 11 passed in 0.61s"""
PYTEST_PASS = "............                                                            [100%]\n12 passed in 0.58s"


def capture(t: Transcript, project: str = "acme/web") -> list[MemoryItem]:
    """The items capture makes of a test transcript, as the Stop hook would."""
    return capture_transcript(t.data(), SessionFacts(project, t.session_id, "Stop", None, NOW))


def of_rule(items: list[MemoryItem], rule: str) -> list[MemoryItem]:
    """The items a capture rule made (``failure_fix``, ``episode``, ``correction``, ``remember``)."""
    return [i for i in items if i.provenance and i.provenance.rule == rule]
