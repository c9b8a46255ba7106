"""README.md's first session, typed as written, in a fresh git repository with the README's example file.

The commands are read from the README's "A first session" section (its ``sh`` blocks) and run through bash
exactly as they are written there: ``.venv/bin/ctxbus`` is this interpreter's virtualenv, linked into the
repository, and the working directory is the repository (a git checkout with an ``origin`` remote, as a clone
has). ``make setup`` is not run (the suite runs inside its result) and ``.venv/bin/ctxbus up`` runs in the
background, as the README's first terminal does. Then the example prompt must get the example's convention:
from ``ctxbus request``, from the hook run by hand and from the hook ``ctxbus hooks install`` wrote, as
Claude Code runs it on the next prompt; and ``ctxbus status`` names the project they all used and the hooks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## A first session"
UP = ".venv/bin/ctxbus up"
SETUP = "make setup"


@dataclass(frozen=True)
class Session:
    commands: list[str]  # the shell lines, comments and blank lines left out, in the README's order
    expected_heading: str  # the first `### ` line of the README's example output


def first_session(readme: str) -> Session:
    lines = readme.splitlines(keepends=True)
    start = lines.index(SECTION + "\n")
    end, fenced = start + 1, False
    while end < len(lines) and (fenced or not lines[end].startswith("## ")):  # a `## ` in a block is output
        fenced ^= lines[end].startswith("```")
        end += 1
    section = "".join(lines[start:end])
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    commands = [
        line.strip()
        for lang, body in blocks
        if lang == "sh"
        for line in body.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    outputs = [body for lang, body in blocks if lang == "text"]
    assert outputs, "the first session shows no example output (a ```text block)"
    headings = [line for line in outputs[0].splitlines() if line.startswith("### ")]
    assert headings, "the example output shows no memory (a `### ` heading)"
    return Session(commands, headings[0].removeprefix("### "))


def test_the_first_session_is_parsed_from_the_readme() -> None:
    session = first_session((ROOT / "README.md").read_text(encoding="utf-8"))
    assert session.commands[:2] == [SETUP, UP]
    assert all(c.startswith(".venv/bin/ctxbus ") for c in session.commands[2:] if not c.startswith("echo "))
    assert not any("--project" in c for c in session.commands), "the first session names no project"
    assert any(c.endswith("memory import examples/conventions.md") for c in session.commands)
    assert (ROOT / "examples" / "conventions.md").is_file()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh clone, as far as the session can tell: the example file, a git checkout with an origin remote,
    and `.venv` (the virtualenv running this test, which has ctxbus installed)."""
    if not (Path(sys.prefix) / "bin" / "ctxbus").exists():
        pytest.skip(f"no ctxbus console script in {sys.prefix}")
    root = tmp_path / "web"
    (root / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "conventions.md", root / "examples" / "conventions.md")
    (root / ".venv").symlink_to(Path(sys.prefix))
    for args in (["init", "-q"], ["remote", "add", "origin", "https://github.com/acme/web.git"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    e.update(
        CTXBUS_DATA_DIR=str(tmp_path / "data"),
        CTXBUS_SERVICE_METRICS_PORT="0",  # free ports: other stacks may run on this machine
        CTXBUS_GATEWAY_PORT="0",
        HOME=str(tmp_path / "home"),  # `hooks install` and the pattern-file fallback read nothing of the user's
    )
    return e


@pytest.fixture
def stopper() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def bash(line: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def context_of(hook_stdout: str) -> str:
    answer = json.loads(hook_stdout)
    return str(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_the_readme_first_session_runs_as_written(
    repo: Path, env: dict[str, str], stopper: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    session = first_session((ROOT / "README.md").read_text(encoding="utf-8"))
    runtime = Path(env["CTXBUS_DATA_DIR"]) / "runtime.json"
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in session.commands:
        if line == SETUP:
            continue  # the suite runs inside what `make setup` made
        if line == UP:  # the README's first terminal: it runs until stopped
            log = (tmp_path / "up.log").open("wb")
            proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=repo, env=env, stdout=log, stderr=log)
            stopper.append(proc)
            deadline = time.monotonic() + 90
            while not runtime.exists():
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "up.log").read_text()
                time.sleep(0.1)
            continue
        done = bash(line, repo, env)
        assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        outputs[line] = done

    imported = next(done for line, done in outputs.items() if " memory import " in line)
    assert json.loads(imported.stdout.splitlines()[-1])["imported"] == 10

    asked = next(done for line, done in outputs.items() if " request " in line)
    assert f"### {session.expected_heading}" in asked.stdout, asked.stdout
    assert "end to end" in asked.stderr

    status = next(done for line, done in outputs.items() if line.endswith(" status"))
    assert "github.com/acme/web" in status.stdout  # the project the import and the request used, from the remote
    assert "settings.local.json (project, personal): installed" in status.stdout

    by_hand = [done for line, done in outputs.items() if "ctxbus hook user-prompt-submit" in line]
    for done in by_hand:  # the hook run by hand, as the README shows it
        assert session.expected_heading in context_of(done.stdout), done.stdout

    # the next prompt in Claude Code: the command `hooks install` wrote, run as Claude Code runs it
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    (entry,) = settings["hooks"]["UserPromptSubmit"]
    (hook,) = entry["hooks"]
    prompt = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "readme-1",
        "cwd": str(repo),
        "prompt": "Fix login after password reset",
    }
    called = subprocess.run(
        ["bash", "-c", hook["command"]],
        cwd=repo,
        env=env,
        input=json.dumps(prompt),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert called.returncode == 0, called.stderr
    assert session.expected_heading in context_of(called.stdout), called.stdout
