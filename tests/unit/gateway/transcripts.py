"""Claude Code transcript entries and hook inputs for the gateway's outcome tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PASS = "....\n4 passed in 0.18s"
FAIL = ".F..\n1 failed, 3 passed in 0.20s"


def prompt(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}, "uuid": f"p-{abs(hash(text))}"}


def say(text: str, uuid: str = "a1") -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "message": {"content": [{"type": "text", "text": text}]}}


def bash(tool_id: str, command: str = "pytest -q") -> dict[str, Any]:
    block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
    return {"type": "assistant", "message": {"content": [block]}}


def result(tool_id: str, output: str, code: int = 0) -> dict[str, Any]:
    content = f"Exit code {code}\n{output}" if code else output
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": bool(code)}
    response: Any = {"stdout": output, "stderr": "", "interrupted": False} if not code else f"Error: {content}"
    return {"type": "user", "message": {"role": "user", "content": [block]}, "toolUseResult": response}


def append(path: Path, *entries: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for entry in entries:
            fh.write(json.dumps(entry) + "\n")


def hook(event: str, transcript: Path, session: str = "s1", **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(transcript.parent),
        "hook_event_name": event,
        **fields,
    }


def post_tool_use(
    transcript: Path, tool_id: str, stdout: str, command: str = "pytest -q 2>&1 | tail -3"
) -> dict[str, Any]:
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    return hook(
        "PostToolUse",
        transcript,
        tool_name="Bash",
        tool_input={"command": command, "description": "Run the tests"},
        tool_response=response,
        tool_use_id=tool_id,
    )
