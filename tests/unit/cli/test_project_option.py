"""Every command's ``--project`` defaults to the project the hooks derive for the current directory (issue 21)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ctxbus.cli.errors import CliError
from ctxbus.cli.main import build_parser
from ctxbus.cli.project_option import project_of
from ctxbus.hooks.project import project_for

#: each command that acts on one project, with the arguments it needs besides --project
COMMANDS = [
    ["request", "Fix login"],
    ["memory", "import", "notes.md"],
    ["search", "--queries", "q.jsonl"],
    ["prime", "Fix login"],
    ["outcome", "record", "--session", "s", "--outcome", "successful"],
    ["attempt", "record", "--task", "t", "--attempt", "1", "--provider", "p", "--status", "failed"],
    ["precontext", "--task", "t", "--type", "retry"],
]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "web"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/web.git\n')
    (root / "src").mkdir()
    monkeypatch.delenv("CTXBUS_PROJECT", raising=False)
    monkeypatch.chdir(root / "src")
    return root


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_without_project_the_hooks_project_of_the_directory(repo: Path, argv: list[str]) -> None:
    args = parse(argv)
    assert project_of(args) == "github.com/acme/web" == project_for(str(repo / "src"), env={})


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_explicit_project_wins_and_a_blank_one_is_refused(repo: Path, argv: list[str]) -> None:
    assert project_of(parse([*argv, "--project", " acme/api "])) == "acme/api"
    with pytest.raises(CliError, match="blank"):
        project_of(parse([*argv, "--project", " "]))


def test_the_environment_and_a_pinned_name_count_as_for_the_hooks(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "ctxbus.json").write_text('{"project": "acme/pinned"}')
    assert project_of(parse(COMMANDS[1])) == "acme/pinned"
    monkeypatch.setenv("CTXBUS_PROJECT", "from-env")
    assert project_of(parse(COMMANDS[1])) == "from-env"
