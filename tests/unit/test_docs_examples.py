"""The import examples the docs show parse as they are, with the CLI's own dispatch by suffix; and the README's
example file is what its first session says: ten conventions, one a heading, the example prompt's among them."""

from __future__ import annotations

import re
from pathlib import Path

from ctxbus.cli.memory_cmds import parse_file
from ctxbus.memory.model import MemoryKind

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def import_examples() -> list[tuple[str, str]]:
    lines = (ROOT / "docs" / "retrieval.md").read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index("## Import formats\n")
    end, fenced = start + 1, False
    while end < len(lines) and (fenced or not lines[end].startswith("## ")):  # a `## ` in a block is the example's
        fenced ^= lines[end].startswith("```")
        end += 1
    return BLOCK.findall("".join(lines[start:end]))


def test_every_import_example_of_the_docs_parses(tmp_path: Path) -> None:
    examples = import_examples()
    names = {"markdown": "conventions.md", "json": "learned_patterns.json"}
    counted = []
    for i, (lang, body) in enumerate(examples):
        jsonl = lang == "json" and not body.lstrip().startswith("{\n")  # one object a line
        path = tmp_path / str(i) / ("memories.jsonl" if jsonl else names[lang])
        path.parent.mkdir()
        path.write_text(body, encoding="utf-8")
        parsed = parse_file(path, "demo")
        assert not parsed.errors, (path.name, parsed.errors)
        counted.append((path.name, len(parsed.items)))
    assert counted == [("conventions.md", 2), ("memories.jsonl", 3), ("learned_patterns.json", 1)]


def test_the_readme_example_file() -> None:
    parsed = parse_file(ROOT / "examples" / "conventions.md", "demo")
    assert not parsed.errors
    items = parsed.items
    assert len(items) == 10
    assert {item.kind for item in items} == {MemoryKind.CONVENTION}
    assert all("#" in item.id for item in items), "no text between the title and the first heading"
    assert "conventions#password-reset-must-invalidate-every-session" in {item.id for item in items}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Fix login after password reset" in readme and "10 here" in readme
