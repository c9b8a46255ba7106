from __future__ import annotations

from pathlib import Path

import pytest

from ctxbus.hooks.project import (
    HEAD_CHARS,
    MAX_PROJECT_CHARS,
    SOURCE_CONFIG,
    SOURCE_ENV,
    SOURCE_PATH,
    SOURCE_REMOTE,
    git_root,
    normalise_remote,
    project_for,
    project_source,
    shorten_project,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:acme/web.git", "github.com/acme/web"),
        ("https://github.com/acme/web", "github.com/acme/web"),
        ("https://user:token@GitLab.example.com:8443/group/sub/app.git", "gitlab.example.com/group/sub/app"),
        ("ssh://git@bitbucket.org/team/repo.git", "bitbucket.org/team/repo"),
        ("/srv/git/local-only", None),
    ],
)
def test_remotes_are_normalised(url: str, expected: str | None) -> None:
    assert normalise_remote(url) == expected


def repo(tmp_path: Path, remote: str | None = None) -> Path:
    root = tmp_path / "work" / "web"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "auth").mkdir(parents=True)
    if remote:
        (root / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {remote}\n')
    return root


def test_the_origin_remote_names_the_project_from_any_subdirectory(tmp_path: Path) -> None:
    root = repo(tmp_path, "git@github.com:acme/web.git")
    assert git_root(str(root / "src" / "auth")) == str(root)
    assert project_for(str(root / "src" / "auth"), env={}) == "github.com/acme/web"


def test_without_a_remote_the_project_is_the_absolute_root_never_a_bare_name(tmp_path: Path) -> None:
    a, b = repo(tmp_path / "a"), repo(tmp_path / "b")  # both directories are called "web"
    pa, pb = project_for(str(a / "src"), env={}), project_for(str(b / "src"), env={})
    assert pa == str(a) and pb == str(b) and pa != pb


def test_a_config_file_and_the_environment_override(tmp_path: Path) -> None:
    root = repo(tmp_path, "git@github.com:acme/web.git")
    (root / ".claude").mkdir()
    (root / ".claude" / "ctxbus.json").write_text('{"project": "acme/web"}')
    assert project_for(str(root / "src"), env={}) == "acme/web"
    assert project_for(str(root), env={"CTXBUS_PROJECT": "pinned"}) == "pinned"


def test_a_worktree_file_points_at_the_main_repository(tmp_path: Path) -> None:
    main = repo(tmp_path, "https://github.com/acme/web.git")
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    assert project_for(str(wt), env={}) == "github.com/acme/web"


def test_outside_any_repository_the_directory_itself(tmp_path: Path) -> None:
    plain = tmp_path / "notes"
    plain.mkdir()
    assert project_for(str(plain), env={}) == str(plain)


def test_long_ids_are_shortened_with_a_hash_never_cut(tmp_path: Path) -> None:
    """Issue 10, finding 5: two repositories whose paths share their first 200 characters were one project."""
    base = tmp_path / ("x" * 150) / ("y" * 100)
    a, b = repo(base / "a"), repo(base / "b")
    pa, pb = project_for(str(a / "src"), env={}), project_for(str(b / "src"), env={})
    assert str(a)[:MAX_PROJECT_CHARS] == str(b)[:MAX_PROJECT_CHARS]  # what cutting made one project
    assert pa != pb
    assert len(pa) == len(pb) == MAX_PROJECT_CHARS
    assert pa.startswith(str(a)[:HEAD_CHARS]) and "..." in pa and pa.split("~")[0].endswith("/a/work/web")
    assert project_for(str(a), env={}) == pa  # stable


def test_a_long_ctxbus_project_is_shortened_the_same_way() -> None:
    long = "team/" + "p" * 300
    assert project_for("/", env={"CTXBUS_PROJECT": long}) == shorten_project(long)
    assert shorten_project(long) != shorten_project(long + "q")
    assert shorten_project("acme/web") == "acme/web"
    exact = "z" * MAX_PROJECT_CHARS
    assert shorten_project(exact) == exact
    assert len(shorten_project(exact + "z")) == MAX_PROJECT_CHARS


def test_the_source_of_each_name_is_told(tmp_path: Path) -> None:
    root = repo(tmp_path, "git@github.com:acme/web.git")
    assert project_source(str(root / "src"), env={}) == ("github.com/acme/web", SOURCE_REMOTE)
    assert project_source(str(root), env={"CTXBUS_PROJECT": " pinned "}) == ("pinned", SOURCE_ENV)
    (root / ".claude").mkdir()
    (root / ".claude" / "ctxbus.json").write_text('{"project": "acme/web"}')
    assert project_source(str(root / "src"), env={}) == ("acme/web", SOURCE_CONFIG)
    bare = repo(tmp_path / "bare")
    assert project_source(str(bare / "src"), env={}) == (str(bare), SOURCE_PATH)


def test_a_repository_can_turn_session_capture_off(tmp_path: Path) -> None:
    from ctxbus.hooks.project import capture_allowed

    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    assert capture_allowed(str(tmp_path / "src"))  # no file: allowed
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ctxbus.json").write_text('{"project": "acme/web", "capture": false}')
    assert not capture_allowed(str(tmp_path / "src"))
    (tmp_path / ".claude" / "ctxbus.json").write_text('{"project": "acme/web", "capture": true}')
    assert capture_allowed(str(tmp_path / "src"))
