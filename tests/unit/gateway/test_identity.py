"""Whose hook a call is (issue 10, finding 5): the caller's project and directory, never the gateway's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.gateway.identity import NO_CWD, RESOLVED_PROJECT, identify, project_of, resolved
from ctxbus.hooks.project import MAX_PROJECT_CHARS
from ctxbus.hooks.wire import CWD_HEADER, PROJECT_HEADER, encode_value


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "r é"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "ctxbus.json").write_text(json.dumps({"project": "acme/web"}))
    return root


def test_the_inputs_cwd_names_the_project_without_the_gateways_env(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBUS_PROJECT", "the-gateways-own")
    identity = identify({"cwd": str(repo)}, {})
    assert (identity.project, identity.cwd, identity.source) == ("acme/web", str(repo), "cwd")


def test_the_clients_project_wins(repo: Path) -> None:
    headers = {PROJECT_HEADER: encode_value("téam/x"), CWD_HEADER: encode_value("/elsewhere")}
    identity = identify({"cwd": str(repo)}, headers)
    assert (identity.project, identity.cwd, identity.source) == ("téam/x", str(repo), "client")
    long = identify({}, {PROJECT_HEADER: "p" * 500})
    assert long.project is not None and len(long.project) == MAX_PROJECT_CHARS and long.cwd is None


def test_the_clients_cwd_when_the_input_has_none(repo: Path) -> None:
    identity = identify({"hook_event_name": "UserPromptSubmit"}, {CWD_HEADER: encode_value(str(repo))})
    assert (identity.project, identity.cwd) == ("acme/web", str(repo))


@pytest.mark.parametrize("cwd", [None, "", "   ", "relative/dir", 42, ["/"]])
def test_no_absolute_cwd_and_no_project_is_no_identity(
    cwd: object, monkeypatch: pytest.MonkeyPatch, repo: Path
) -> None:
    monkeypatch.chdir(repo)  # the gateway's own directory never counts
    monkeypatch.setenv("CTXBUS_PROJECT", "the-gateways-own")
    identity = identify({"cwd": cwd}, {CWD_HEADER: "relative"})
    assert (identity.project, identity.cwd, identity.source) == (None, None, NO_CWD)


def test_resolved_inputs_carry_their_project(repo: Path) -> None:
    hook_input = resolved({"cwd": "ignored"}, identify({}, {PROJECT_HEADER: "acme/api", CWD_HEADER: str(repo)}))
    assert hook_input["cwd"] == str(repo) and hook_input[RESOLVED_PROJECT] == "acme/api"
    assert project_of(hook_input) == "acme/api"
    assert project_of({"cwd": str(repo)}) == "acme/web"
    with pytest.raises(ValueError, match="cwd"):
        project_of({"cwd": "relative"})
