"""One project identity (issue 21): in a git repository with hooks installed and no ``--project`` anywhere, what
``ctxbus memory import`` stores from that directory is what a UserPromptSubmit hook call from it gets."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .up_stack import Stack, stop_quietly

pytestmark = pytest.mark.integration

CONVENTIONS = """# Team conventions

## Password reset must invalidate every session

After a password reset, revoke every refresh token and clear the session cache, so no old login survives.

## Money is stored in integer cents

Amounts are integer cents in the database and the API; never floats.
"""
PROMPT = "After the password reset, revoke every refresh token and clear the session cache: the old login survives"


def ctxbus(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    (tmp_path / "home").mkdir()
    up = Stack(tmp_path, {"HOME": str(tmp_path / "home")})
    up.start()
    try:
        yield up
    finally:
        stop_quietly(up.proc)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src" / "auth").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "git@github.com:acme/shop.git"], check=True)
    (root / "docs").mkdir()
    (root / "docs" / "conventions.md").write_text(CONVENTIONS, encoding="utf-8")
    return root


def test_hooks_get_what_memory_import_stored_from_the_same_repository_with_no_project_anywhere(
    stack: Stack, repo: Path
) -> None:
    env = stack.env
    installed = ctxbus(env, repo, "hooks", "install")
    assert installed.returncode == 0, installed.stderr
    imported = ctxbus(env, repo / "docs", "memory", "import", "conventions.md")
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout.splitlines()[-1])
    assert summary["project"] == "github.com/acme/shop" and summary["confirmed"] == summary["imported"] >= 2

    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    (command,) = [h["command"] for g in settings["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    hook_input = {
        "session_id": "s-identity",
        "transcript_path": "/dev/null",
        "cwd": str(repo / "src" / "auth"),  # any directory of the repository
        "hook_event_name": "UserPromptSubmit",
        "prompt": PROMPT,
    }
    hook_env = {**env, "CTXBUS_HOOK_TIMEOUT_MS": "20000"}  # the budget of a cold first request on a busy machine
    done = subprocess.run(
        shlex.split(command),
        input=json.dumps(hook_input).encode(),
        env=hook_env,
        cwd=repo / "src" / "auth",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Password reset must invalidate every session" in context, (context, (stack.log.read_text()[-3000:]))
    assert "integer cents" not in context  # the other convention is not about this prompt

    status = ctxbus(env, repo / "src", "status", "--json")  # what ctxbus sees from here, the stack running
    assert status.returncode == 0, status.stderr
    facts = json.loads(status.stdout)
    assert (facts["project"], facts["source"]) == ("github.com/acme/shop", "git remote")
    assert (facts["items"], facts["via"]) == (summary["imported"], "running stack")
    assert facts["stack"]["running"] and facts["stack"]["health"] == "ready"
    assert {h["scope"]: h["state"] for h in facts["hooks"]} == {
        "project, shared": "no file",
        "project, personal": "installed",
        "user": "no file",
    }

    assert stack.proc is not None
    stack.proc.send_signal(signal.SIGTERM)
    assert stack.proc.wait(60) == 0
