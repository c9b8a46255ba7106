"""README.md is for a newcomer's first hour: short, its commands the real ones, and no link of it broken.
Everything else is in docs/ (tests/unit/test_docs_build.py builds it)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 300
LINK = re.compile(r"(?<!!)\[(?:[^\]]*)\]\(([^)\s]+)\)")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # not http:, mailto: ...


def slugify(heading: str) -> str:
    """A heading's anchor as the docs site makes it (Python-Markdown's toc: ASCII, word characters, dashes)."""
    ascii_text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_text).strip().lower())


def headings(path: Path) -> set[str]:
    """The anchors of a markdown file's headings (fenced code left out; a page's included files counted), slugged
    as the docs site slugs them; for these headings GitHub's anchors are the same."""
    text = path.read_text(encoding="utf-8")
    for included in SNIPPET.findall(text):
        text += "\n" + (ROOT / included).read_text(encoding="utf-8")
    anchors: set[str] = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.+?)\s*#*$", line)):
            anchors.add(slugify(re.sub(r"[`*]", "", m.group(1))))
    return anchors


def test_the_readme_is_short() -> None:
    lines = readme().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; at most {MAX_LINES} (the rest belongs in docs/)"


def test_the_readme_keeps_the_set_up_run_and_test_commands() -> None:
    text = readme()
    for command in ("`make setup`", "`.venv/bin/ctxbus up`", "`make test`"):  # .ci/run runs `make test`
        assert command in text, command
    assert "make test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("target", relative_links(readme()))
def test_every_link_of_the_readme_resolves(target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (ROOT / path) if path else README
    assert file.exists(), f"README.md links to {target}: no such file"
    if anchor and file.suffix == ".md":
        assert anchor in headings(file), f"README.md links to {target}: {path or 'README.md'} has no such heading"


def test_the_readme_links_every_docs_page() -> None:
    """A page that includes a file of the repository (the contract, the architecture) may be linked as that file:
    on GitHub the page itself shows only the include line."""
    linked = {t.partition("#")[0] for t in relative_links(readme())}
    unlinked = [
        page.name
        for page in (ROOT / "docs").glob("*.md")
        if not ({f"docs/{page.name}", *SNIPPET.findall(page.read_text(encoding="utf-8"))} & linked)
    ]
    assert not unlinked, f"docs pages the README does not link: {sorted(unlinked)}"


def test_the_anchor_check_has_teeth() -> None:
    assert "kafka-security-tls-and-sasl" in headings(ROOT / "docs" / "deployment.md")
    assert "processes-of-ctxbus-up" in headings(ROOT / "docs" / "capacity.md")
    assert "compatibility-rule-full-compatibility-checked-by-tests" in headings(ROOT / "docs" / "contract.md")
    assert "no-such-heading" not in headings(ROOT / "docs" / "deployment.md")
