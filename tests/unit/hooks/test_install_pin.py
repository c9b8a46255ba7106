"""`ctxbus hooks install --project NAME` pins the repository's project in `.claude/ctxbus.json` (issue 21):
byte-exact and idempotent like the settings files, and `uninstall` gives back what was there."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from ctxbus.cli import hooks_cmds
from ctxbus.cli.errors import CliError
from ctxbus.cli.main import build_parser
from ctxbus.hooks.project import project_source

PRIOR = '{\n    "project": "old/name",\n    "note": "héllo"\n}\n'


def args(**extra: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "settings_file": None,
        "user": False,
        "local": False,
        "project": None,
        "shared": False,
        "tool_failures": False,
        "dry_run": False,
    }
    base.update(extra)
    return argparse.Namespace(**base)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root / "src")  # from a subdirectory: the pin goes to the repository's root
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("CTXBUS_PROJECT", raising=False)
    return root


def test_a_pin_is_written_once_read_by_the_hooks_and_removed_by_uninstall(repo: Path) -> None:
    pin = repo / ".claude" / "ctxbus.json"
    assert hooks_cmds.cmd_install(args(project="acme/web")) == 0
    assert pin.read_text(encoding="utf-8") == '{\n  "project": "acme/web"\n}\n'
    assert project_source(str(repo / "src"), env={}) == ("acme/web", "ctxbus.json")
    once = pin.read_bytes()
    assert hooks_cmds.cmd_install(args(project="acme/web")) == 0
    assert pin.read_bytes() == once  # idempotent, byte for byte
    assert hooks_cmds.cmd_uninstall(args()) == 0
    assert not pin.exists() and (repo / ".claude").is_dir()
    assert not (repo / ".claude" / "settings.local.json").exists()


def test_an_existing_file_keeps_its_text_and_gets_its_bytes_back(repo: Path) -> None:
    pin = repo / ".claude" / "ctxbus.json"
    pin.parent.mkdir()
    pin.write_text(PRIOR, encoding="utf-8")
    assert hooks_cmds.cmd_install(args(project="acme/web")) == 0
    text = pin.read_text(encoding="utf-8")
    assert text == '{\n    "project": "acme/web",\n    "note": "héllo"\n}\n'  # indent, order, text kept
    assert hooks_cmds.cmd_install(args(project="acme/api")) == 0  # pinned again: the first original is kept
    assert json.loads(pin.read_text())["project"] == "acme/api"
    assert hooks_cmds.cmd_uninstall(args()) == 0
    assert pin.read_text(encoding="utf-8") == PRIOR


def test_a_pin_edited_since_is_left_alone_and_one_ctxbus_never_wrote_too(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pin = repo / ".claude" / "ctxbus.json"
    hooks_cmds.cmd_install(args(project="acme/web"))
    pin.write_text('{"project": "mine"}', encoding="utf-8")
    hooks_cmds.cmd_uninstall(args())
    assert pin.read_text() == '{"project": "mine"}' and "changed since" in capsys.readouterr().out
    hooks_cmds.cmd_install(args())  # no --project: no pin written, none taken away
    hooks_cmds.cmd_uninstall(args())
    assert pin.read_text() == '{"project": "mine"}'


def test_dry_run_shows_the_pin_and_writes_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hooks_cmds.cmd_install(args(project="acme/web", dry_run=True)) == 0
    out = capsys.readouterr().out
    assert '+  "project": "acme/web"' in out and "ctxbus.json" in out
    assert not (repo / ".claude").exists()


def test_a_blank_or_unreadable_pin_is_refused_before_anything_is_written(repo: Path) -> None:
    with pytest.raises(CliError, match="blank"):
        hooks_cmds.cmd_install(args(project="  "))
    (repo / ".claude").mkdir()
    (repo / ".claude" / "ctxbus.json").write_text("[1, 2]")
    with pytest.raises(CliError, match="not a JSON object"):
        hooks_cmds.cmd_install(args(project="acme/web"))
    assert not (repo / ".claude" / "settings.local.json").exists()


def test_the_command_line_takes_a_name_and_still_the_bare_scope_flag() -> None:
    parser = build_parser()
    assert parser.parse_args(["hooks", "install", "--project", "acme/web"]).project == "acme/web"
    assert parser.parse_args(["hooks", "install", "--shared", "--project", "acme/web"]).shared
    bare = parser.parse_args(["hooks", "install", "--project", "--dry-run"])  # the old scope flag: no pin
    assert bare.project is True and bare.dry_run
    assert parser.parse_args(["hooks", "install", "--local"]).local
