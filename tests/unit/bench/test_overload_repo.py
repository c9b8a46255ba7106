"""bench overload's hook calls come from a directory of the benchmark's project: the gateway takes the project from
the caller's directory (never its own environment), so without it every call got an empty context."""

from pathlib import Path

from ctxbus.bench.overload import _fallback_repo
from ctxbus.bench.stack import PROJECT
from ctxbus.hooks.project import project_for


def test_the_overload_repository_names_the_benchmarks_project(tmp_path: Path) -> None:
    repo = _fallback_repo(tmp_path)
    assert project_for(str(repo), env={}) == PROJECT
    assert (repo / ".claude" / "learned_patterns.json").exists()
