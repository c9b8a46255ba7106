"""Markdown documents chunked by heading: ids, titles, content, kinds, domains, oversize sections, file errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxbus.memory.markdown_file import infer_kind, parse_markdown, slugify, split_content
from ctxbus.memory.model import MAX_CONTENT_CHARS, MemoryKind
from ctxbus.memory.parse_result import MemoryFileError, ParsedMemories

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)

ADR = """\
---
status: accepted
domains: [messaging, Infra]
---
# ADR 0007: Use Kafka for the context bus

Status: Accepted
Date: 2026-01-10

## Context

Agents need durable, replayable events.

```python
# This is a comment in code, not a heading
producer = AIOKafkaProducer(enable_idempotence=True)
```

## Decision

Use Kafka, with an embedded broker in development.

### Consequences

- Operations must run a broker.
- Schemas are versioned in Avro.

## Alternatives considered

## Decision

A second section with the same heading.
"""

CONVENTIONS = """\
# Python conventions

Domains: python, **style**

## Imports

Use absolute imports; `from __future__ import annotations` first.

## Error handling

Raise specific exceptions. Never `except Exception: pass`.

#### A minor note

Deeper headings stay in their section.

## Python conventions: testing

Tests live in tests/unit and tests/integration.
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_an_adr_is_chunked_by_section_with_stable_ids(tmp_path: Path) -> None:
    path = write(tmp_path / "docs" / "adr", "0007-use-kafka.md", ADR)
    parsed = parse_markdown(path, project="ctxbus", now=NOW)
    assert isinstance(parsed, ParsedMemories) and parsed.errors == []
    assert [i.id for i in parsed.items] == [
        "0007-use-kafka",
        "0007-use-kafka#context",
        "0007-use-kafka#decision",
        "0007-use-kafka#consequences",
        "0007-use-kafka#decision-2",
    ]
    title = "ADR 0007: Use Kafka for the context bus"
    assert [i.title for i in parsed.items] == [
        title,
        f"{title}: Context",
        f"{title}: Decision",
        f"{title}: Decision / Consequences",
        f"{title}: Decision",
    ]
    preamble, context, decision, consequences, _ = parsed.items
    assert preamble.content == "Status: Accepted\nDate: 2026-01-10"
    assert context.content.startswith("Agents need durable") and context.content.endswith("```")
    assert "# This is a comment in code, not a heading" in context.content
    assert decision.content == "Use Kafka, with an embedded broker in development."
    assert consequences.content == "- Operations must run a broker.\n- Schemas are versioned in Avro."
    for item in parsed.items:
        assert (item.kind, item.project, item.source) == (MemoryKind.DECISION, "ctxbus", str(path))
        assert item.domains == ("messaging", "infra")
        assert item.created_at == item.updated_at == NOW
    again = parse_markdown(path, project="ctxbus", now=NOW)
    assert again == parsed


def test_a_conventions_doc_is_chunked_and_typed(tmp_path: Path) -> None:
    path = write(tmp_path, "python.md", CONVENTIONS)
    parsed = parse_markdown(path, project="ctxbus")
    assert parsed.errors == []
    assert [(i.id, i.title) for i in parsed.items] == [
        ("python", "Python conventions"),
        ("python#imports", "Python conventions: Imports"),
        ("python#error-handling", "Python conventions: Error handling"),
        ("python#python-conventions-testing", "Python conventions: testing"),  # already says the title
    ]
    assert parsed.items[0].content == "Domains: python, **style**"
    assert parsed.items[2].content.endswith("#### A minor note\n\nDeeper headings stay in their section.")
    assert {i.kind for i in parsed.items} == {MemoryKind.CONVENTION}
    assert {i.domains for i in parsed.items} == {("python", "style")}


def test_the_kind_given_wins(tmp_path: Path) -> None:
    path = write(tmp_path / "adr", "0007-use-kafka.md", ADR)
    parsed = parse_markdown(path, project="p", kind=MemoryKind.PRINCIPLE)
    assert {i.kind for i in parsed.items} == {MemoryKind.PRINCIPLE}


@pytest.mark.parametrize(
    ("directory", "name", "text", "expected"),
    [
        ("docs", "notes.md", "# ADR 12: Retries\n\n## Why\n\nx", MemoryKind.DECISION),
        ("docs", "adr-012-retries.md", "# Retries\n\nx", MemoryKind.DECISION),
        ("docs", "retries.md", "# Retries\n\n## Decision\n\nRetry thrice.", MemoryKind.DECISION),
        ("docs", "retries.md", "# Retries\n\n**Status:** proposed\n\nx", MemoryKind.DECISION),
        ("docs", "style.md", "# Team style guide\n\nx", MemoryKind.CONVENTION),
        ("docs", "naming-conventions.md", "# Naming\n\nx", MemoryKind.CONVENTION),
        ("docs/decisions", "retries.md", "# Retries\n\nx", MemoryKind.DECISION),
        ("repo/ADR", "retries.md", "# Retries\n\nx", MemoryKind.DECISION),
        ("docs", "retries.md", "# Retries\n\nx", MemoryKind.CONVENTION),
        ("docs", "retries.md", "# Retries\n\n```\nStatus: not prose\n```", MemoryKind.CONVENTION),
    ],
)
def test_the_kind_is_inferred(tmp_path: Path, directory: str, name: str, text: str, expected: MemoryKind) -> None:
    parsed = parse_markdown(write(tmp_path / directory, name, text), project="p")
    assert parsed.items and {i.kind for i in parsed.items} == {expected}


def test_infer_kind_directly() -> None:
    assert infer_kind(Path("x/decisions/a.md"), None, [], []) is MemoryKind.DECISION
    assert infer_kind(Path("x/a.md"), "Coding Conventions", [], ["Status: draft"]) is MemoryKind.DECISION
    assert infer_kind(Path("x/adr/a.md"), "Coding Conventions", [], []) is MemoryKind.CONVENTION


def test_a_document_without_headings_is_one_item(tmp_path: Path) -> None:
    text = "Always run `ruff format` before committing.\n\nCI rejects unformatted code.\n"
    path = write(tmp_path, "formatting.md", text)
    (item,) = parse_markdown(path, project="p").items
    assert (item.id, item.title, item.content) == ("formatting", "", text.strip())
    assert item.kind is MemoryKind.CONVENTION


def test_a_document_with_only_a_title_is_one_item(tmp_path: Path) -> None:
    (item,) = parse_markdown(write(tmp_path, "retries.md", "# Retry policy\n\nRetry three times.\n"), project="p").items
    assert (item.id, item.title, item.content) == ("retries", "Retry policy", "Retry three times.")


def test_empty_sections_and_documents_are_skipped(tmp_path: Path) -> None:
    parsed = parse_markdown(write(tmp_path, "a.md", "# Title\n\n## Empty\n\n## Also empty\n   \n"), project="p")
    assert parsed == ParsedMemories([], [])
    assert parse_markdown(write(tmp_path, "b.md", ""), project="p") == ParsedMemories([], [])


def test_sections_without_a_document_title(tmp_path: Path) -> None:
    text = "Intro text.\n\n## First rule\n\nOne.\n\n# Second part\n\nTwo.\n\n### Detail\n\nThree.\n"
    parsed = parse_markdown(write(tmp_path, "rules.md", text), project="p")
    assert [(i.id, i.title, i.content) for i in parsed.items] == [
        ("rules", "", "Intro text."),
        ("rules#first-rule", "First rule", "One."),
        ("rules#second-part", "Second part", "Two."),
        ("rules#detail", "Second part: Detail", "Three."),
    ]


def test_headings_inside_tilde_fences_and_closing_hashes(tmp_path: Path) -> None:
    text = "# Doc\n\n## Setup ##\n\n~~~bash\n## not a heading\n~~~\n\n## C# usage\n\nUse records.\n"
    parsed = parse_markdown(write(tmp_path, "doc.md", text), project="p")
    assert [(i.id, i.content) for i in parsed.items] == [
        ("doc#setup", "~~~bash\n## not a heading\n~~~"),
        ("doc#c-usage", "Use records."),
    ]


def test_an_oversize_section_is_split_into_parts(tmp_path: Path) -> None:
    paragraph = ("Keep handlers small. " * 400).strip()  # ~8,400 characters
    body = "\n\n".join(f"{n}. {paragraph}" for n in range(5))  # ~42,000 characters
    text = f"# Handlers\n\n## Size\n\n{body}\n\n## Naming\n\nVerbs first.\n"
    parsed = parse_markdown(write(tmp_path, "handlers.md", text), project="p")
    assert parsed.errors == []
    ids = [i.id for i in parsed.items]
    assert ids == ["handlers#size", "handlers#size-part-2", "handlers#size-part-3", "handlers#naming"]
    parts = parsed.items[:3]
    assert all(len(p.content) <= MAX_CONTENT_CHARS for p in parts)
    assert [p.title for p in parts] == [f"Handlers: Size (part {n} of 3)" for n in (1, 2, 3)]
    assert "\n\n".join(p.content for p in parts) == body.strip()


def test_split_content_falls_back_to_lines_then_cuts() -> None:
    assert split_content("short", limit=10) == ["short"]
    assert split_content("aaaa\n\nbbbb\n\ncccc", limit=10) == ["aaaa\n\nbbbb", "cccc"]
    assert split_content("aaaa\nbbbb\ncccc", limit=10) == ["aaaa\nbbbb", "cccc"]
    assert split_content("x" * 25, limit=10) == ["x" * 10, "x" * 10, "x" * 5]
    code = "```\nline one\n\nline two\n```"
    assert split_content(code + "\n\ntail", limit=len(code)) == [code, "tail"]


def test_part_ids_never_collide_with_headings(tmp_path: Path) -> None:
    text = f"# D\n\n## Size\n\n{'a' * MAX_CONTENT_CHARS}\n\n{'b' * 10}\n\n## Size part 2\n\nsmall\n"
    parsed = parse_markdown(write(tmp_path, "d.md", text), project="p")
    assert [i.id for i in parsed.items] == ["d#size", "d#size-part-2", "d#size-part-2-2"]


def test_slugify() -> None:
    assert slugify("Error handling & retries!") == "error-handling-retries"
    assert slugify("`from __future__` imports") == "from-future-imports"
    assert slugify("Überprüfung der Eingaben") == "überprüfung-der-eingaben"
    assert slugify("!!!") == "section"
    assert len(slugify("word " * 100)) <= 80


def test_front_matter_domains_as_a_list(tmp_path: Path) -> None:
    text = "---\ntitle: x\ndomains:\n  - api\n  - 'storage'\nowner: me\n---\n# Doc\n\nDomains: ignored\n\nBody.\n"
    (item,) = parse_markdown(write(tmp_path, "doc.md", text), project="p").items
    assert item.domains == ("api", "storage")
    assert "owner" not in item.content


def test_no_domains_anywhere(tmp_path: Path) -> None:
    (item,) = parse_markdown(write(tmp_path, "doc.md", "# Doc\n\nBody.\n"), project="p").items
    assert item.domains == ()


def test_a_section_the_model_refuses_is_reported_at_its_heading(tmp_path: Path) -> None:
    name = "n" * 195 + ".md"  # the stem leaves no room for "#<slug>" within the 200-character id limit
    parsed = parse_markdown(write(tmp_path, name, "Intro.\n\n## A long heading\n\nBody.\n"), project="p")
    assert [i.id for i in parsed.items] == ["n" * 195]
    (error,) = parsed.errors
    assert (error.line, error.item_id) == (3, "n" * 195 + "#a-long-heading") and "id" in error.reason


def test_unreadable_and_undecodable_files_are_file_errors(tmp_path: Path) -> None:
    with pytest.raises(MemoryFileError, match="cannot read"):
        parse_markdown(tmp_path / "missing.md", project="p")
    binary = tmp_path / "latin1.md"
    binary.write_bytes("# Caf\u00e9\n".encode("latin-1"))
    with pytest.raises(MemoryFileError, match="not UTF-8") as info:
        parse_markdown(binary, project="p")
    assert info.value.path == binary


def test_windows_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "crlf.md"
    path.write_bytes(b"# Doc\r\n\r\n## Rule\r\n\r\nLine one.\r\nLine two.\r\n")
    (item,) = parse_markdown(path, project="p").items
    assert (item.id, item.content) == ("crlf#rule", "Line one.\nLine two.")
