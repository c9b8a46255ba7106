"""``ctxbus status`` without a running stack (issue 21): the directory's project and its source, the item count
read from the store (or unknown while another process owns it), and where ctxbus's hooks are installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.cli import hooks_cmds
from ctxbus.cli.main import main
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind
from ctxbus.settings import Settings

from ..hooks.test_install_pin import args as hooks_args


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "https://github.com/acme/shop.git"], check=True)
    monkeypatch.chdir(root / "src")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CTXBUS_PROJECT", raising=False)
    return root


def status_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["status", "--json"]) == 0
    facts: dict[str, Any] = json.loads(capsys.readouterr().out)
    return facts


def item(item_id: str, project: str) -> MemoryItem:
    return MemoryItem(id=item_id, project=project, kind=MemoryKind.PATTERN, content=f"content of {item_id}")


def test_a_fresh_repository_no_store_and_no_hooks(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = status_json(capsys)
    assert (facts["project"], facts["source"], facts["items"]) == ("github.com/acme/shop", "git remote", 0)
    assert str(facts["via"]).startswith("no store yet")
    assert facts["stack"] == {"running": False, "runtime_file": str(Settings().runtime_file)}
    assert [(h["scope"], h["state"]) for h in facts["hooks"]] == [
        ("project, shared", "no file"),
        ("project, personal", "no file"),
        ("user", "no file"),
    ]


def test_a_pinned_project_its_items_and_the_installed_hooks(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hooks_cmds.cmd_install(hooks_args(project="acme/pinned"))
    (Path.home() / ".claude").mkdir(parents=True)
    (Path.home() / ".claude" / "settings.json").write_text('{"hooks": {"Stop": [{"hooks": [{"command": "mine"}]}]}}')
    with EdgeVectorStore(Settings().store_dir, model_id="m", dim=4) as store:
        items = [item("a", "acme/pinned"), item("b", "acme/pinned"), item("c", "other"), item("g", GLOBAL_PROJECT)]
        store.upsert(items, [[1.0, 0.0, 0.0, 0.0]] * len(items))
    capsys.readouterr()
    facts = status_json(capsys)
    assert (facts["project"], facts["source"]) == ("acme/pinned", "ctxbus.json")
    assert facts["from"] == str(repo / ".claude" / "ctxbus.json")
    assert (facts["items"], facts["global_items"], facts["via"]) == (2, 1, "store")
    hooks = {h["scope"]: h for h in facts["hooks"]}
    assert (
        hooks["project, personal"]["state"] == "installed"
        and "UserPromptSubmit" in hooks["project, personal"]["events"]
    )
    assert hooks["user"]["state"] == "not installed" and hooks["project, shared"]["state"] == "no file"

    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "project: acme/pinned" in text and "2 in this project, 1 global (store)" in text
    assert "not running" in text and "settings.local.json (project, personal): installed: UserPromptSubmit" in text


def test_while_another_process_owns_the_store_the_count_is_unknown(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with EdgeVectorStore(Settings().store_dir, model_id="m", dim=4):  # held open: the owner's lock
        facts = status_json(capsys)
    assert (facts["items"], facts["via"]) == (None, "unknown (store busy)")
    monkeypatch.setenv("CTXBUS_PROJECT", "from-env")
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "project: from-env" in text and "from:  env (CTXBUS_PROJECT)" in text
