"""`ctxbus mcp install|uninstall` on a project's `.mcp.json`: ctxbus's entry added where Claude Code reads it, every
other byte of the file kept (other servers, odd spacing, tabs, one-line files, non-ASCII, no final newline);
install is idempotent, --dry-run prints the diff and writes nothing, and uninstall gives back the original bytes
(or removes the file it made)."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from ctxbus.cli import mcp_cmds
from ctxbus.mcpserver.config_file import McpFileError, server_entry, with_server, without_server

ENTRY = server_entry("ctxbus", ["mcp"])
#: a hand-written file: another server, odd spacing, a blank line, non-ASCII, no final newline
ODD = (
    '{\n   "mcpServers" :{\n\n      "files": { "command": "npx",  "args": ["-y", "@mcp/files", "/héllo"] },'
    '\n      "db":{"command":"db-mcp"}\n   },\n   "note": "ünïcode – kept"\n}'
)
SHAPES = [
    ODD,
    '{"mcpServers":{"a":{"command":"b"}},"z":1}',  # one line
    '{\n\t"foo": [1, 2],\n\t"mcpServers": {}\n}\n',  # tabs, no servers yet
    '{\n    "x": 1\n}\n',  # no mcpServers at all
    "{}",
    '\ufeff{\n  "mcpServers": {\n    "other": {"command": "x"}\n  }\n}\n',  # a byte-order mark
]


def args(**extra: object) -> argparse.Namespace:
    base: dict[str, object] = {"file": None, "dry_run": False, "portable": False, "project": None}
    base.update(extra)
    return argparse.Namespace(**base)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root / "src")  # the file goes to the repository's root, not the directory
    monkeypatch.setenv("CTXBUS_DATA_DIR", str(tmp_path / "data"))
    return root


@pytest.mark.parametrize("text", SHAPES, ids=range(len(SHAPES)))
def test_the_entry_is_spliced_in_and_everything_else_stays_byte_for_byte(text: str) -> None:
    installed = with_server(text, ENTRY)
    assert installed is not None
    document = json.loads(installed.lstrip("\ufeff"))
    assert document["mcpServers"]["ctxbus"] == ENTRY
    original = json.loads(text.lstrip("\ufeff"))
    assert {k: v for k, v in document["mcpServers"].items() if k != "ctxbus"} == original.get("mcpServers", {})
    assert {k: v for k, v in document.items() if k != "mcpServers"} == {
        k: v for k, v in original.items() if k != "mcpServers"
    }
    # every byte of the original is still there, in order: only ctxbus's text was added
    rest = iter(installed)
    assert all(ch in rest for ch in text)
    assert with_server(installed, ENTRY) == installed  # idempotent


def test_a_file_with_other_servers_loses_only_ctxbus_on_removal() -> None:
    installed = with_server(ODD, ENTRY)
    assert without_server(installed) == ODD


def test_an_older_ctxbus_entry_is_replaced_in_place() -> None:
    old = '{"mcpServers": {"ctxbus": {"command": "/old/ctxbus", "args": ["mcp"]}, "b": {"command": "c"}}}'
    replaced = with_server(old, ENTRY)
    assert replaced == '{"mcpServers": {"ctxbus": {"command": "ctxbus", "args": ["mcp"]}, "b": {"command": "c"}}}'


@pytest.mark.parametrize(
    ("text", "why"),
    [("[1, 2]", "not a JSON object"), ('{"mcpServers": []}', "is not an object"), ("{nope", "not valid JSON")],
)
def test_a_file_ctxbus_will_not_edit_is_refused(text: str, why: str) -> None:
    with pytest.raises(McpFileError, match=why):
        with_server(text, ENTRY)


def test_install_then_uninstall_restores_the_original_bytes(repo: Path) -> None:
    path = repo / ".mcp.json"
    path.write_bytes(ODD.encode())
    assert mcp_cmds.cmd_install(args()) == 0
    once = path.read_bytes()
    assert json.loads(once)["mcpServers"]["ctxbus"]["args"] == ["mcp"]
    assert mcp_cmds.cmd_install(args()) == 0
    assert path.read_bytes() == once  # idempotent, byte for byte
    assert mcp_cmds.cmd_uninstall(args()) == 0
    assert path.read_bytes() == ODD.encode()


def test_without_a_file_install_makes_one_and_uninstall_removes_it(repo: Path) -> None:
    path = repo / ".mcp.json"
    assert mcp_cmds.cmd_install(args(portable=True, project="acme/web")) == 0
    assert json.loads(path.read_text()) == {
        "mcpServers": {"ctxbus": {"command": "ctxbus", "args": ["mcp", "--project", "acme/web"]}}
    }
    assert mcp_cmds.cmd_uninstall(args()) == 0
    assert not path.exists()


def test_uninstall_after_the_user_edited_the_file_keeps_their_edit(repo: Path) -> None:
    path = repo / ".mcp.json"
    path.write_text(ODD)
    mcp_cmds.cmd_install(args())
    path.write_text(path.read_text().replace('"db-mcp"', '"db-mcp-2"'))
    mcp_cmds.cmd_uninstall(args())
    assert path.read_text() == ODD.replace('"db-mcp"', '"db-mcp-2"')


def test_dry_run_prints_the_diff_and_writes_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / ".mcp.json"
    path.write_text(ODD)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert mcp_cmds.cmd_install(args(dry_run=True)) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- ") and '+      "ctxbus": {' in out
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    mcp_cmds.cmd_install(args())
    installed = path.read_bytes()
    assert mcp_cmds.cmd_uninstall(args(dry_run=True)) == 0
    assert '-      "ctxbus": {' in capsys.readouterr().out
    assert path.read_bytes() == installed


def test_the_entry_runs_this_installation_unless_portable() -> None:
    mine = mcp_cmds.entry(False, None)
    assert Path(mine["command"]).is_absolute() and mine["args"][-1] == "mcp"
    assert mcp_cmds.entry(True, None) == {"command": "ctxbus", "args": ["mcp"]}


def test_uninstall_leaves_a_file_without_ctxbus_alone(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / ".mcp.json"
    path.write_text(ODD)
    assert mcp_cmds.cmd_uninstall(args()) == 0
    assert path.read_text() == ODD
    assert "has no ctxbus MCP server; nothing changed" in capsys.readouterr().out
