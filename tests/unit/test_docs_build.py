"""The documentation site builds as `make docs` builds it (mkdocs --strict), with no warning: every page in the
nav, every link and anchor found, the included files (schemas/README.md, ARCHITECTURE.md) present."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def build(site: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}  # the Material theme's notice about MkDocs 2.0
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def pages() -> set[str]:
    return {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "_build" not in p.parts}


def test_make_docs_builds_the_same_way() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict -d site" in recipe
    assert "/site/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    built = build(tmp_path / "site")
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    assert not re.search(r"^(WARNING|ERROR)\b", log, flags=re.MULTILINE), log
    for page in pages():
        html = tmp_path / "site" / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert html.is_file(), page
    # the included files are in, and a table's escaped pipe in code shows as a pipe
    assert "Compatibility rule" in (tmp_path / "site" / "contract" / "index.html").read_text()
    assert "Data flow" in (tmp_path / "site" / "architecture" / "index.html").read_text()
    commands = (tmp_path / "site" / "commands" / "index.html").read_text()
    assert "ctxbus run retriever|injector|recorder" in commands and "\\|" not in commands


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)\s*$", config, flags=re.MULTILINE))
    assert nav == pages()


@pytest.mark.parametrize("target", ["nope.md", "capacity.md#no-such-anchor", "../README.md"])
def test_a_broken_link_fails_the_build(tmp_path: Path, target: str) -> None:
    """The strict build has teeth: a page with a link nowhere, an anchor nowhere or a link out of docs/ fails.
    (Never with -q: quiet mode hides the warnings from --strict's count, and the build passes.)"""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# x\n\n[broken]({target})\n")
    (docs / "capacity.md").write_text("# Capacity\n\n## Capacity model\n")
    config = (ROOT / "mkdocs.yml").read_text()
    nav_start = config.index("\nnav:")
    nav_end = config.index("\n\n", nav_start)
    config = config[:nav_start] + "\nnav:\n  - index.md\n  - capacity.md" + config[nav_end:]
    config = config.replace("docs/_build/mkdocs_hooks.py", str(DOCS / "_build" / "mkdocs_hooks.py"))
    (tmp_path / "mkdocs.yml").write_text(config)
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode != 0
    assert target in built.stdout + built.stderr
