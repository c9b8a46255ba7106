"""A project's own documents as memory: ``CLAUDE.md``, ``AGENTS.md``, ``CONTRIBUTING.md`` and its ADRs.

A repository usually says how it wants to be worked on before anyone imports anything: the agent instructions
(``CLAUDE.md``, ``.claude/CLAUDE.md``, ``AGENTS.md``), the contribution guide and the architecture decision records
(``docs/adr/*.md`` and the usual other homes). :func:`find_project_docs` lists the ones a repository has;
:func:`parse_project_docs` reads them into items, one per heading (:mod:`ctxbus.memory.markdown_file`), named by
their path relative to the repository root (so ids and sources are the same in every clone, and the same as a
``ctxbus memory import`` of the file from the root), with the kind inferred per section:

- an ADR (a document under an ADR directory, or one that reads as a decision record) is a **decision**;
- in the other documents, a section that states a rule (*must*, *never*, *always*, *do not* ...) is a
  **principle**, any other a **convention**.

The only I/O is reading the files found (each at most the parser's size limit; at most MAX_DOCS documents).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from ctxbus.memory.markdown_file import parse_markdown_text
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.memory.parse_result import LineError, MemoryFileError, read_text

#: the agent instructions and the contribution guide, at the repository root (or under .claude/)
ROOT_DOCS: Final = ("CLAUDE.md", ".claude/CLAUDE.md", "AGENTS.md", "CONTRIBUTING.md")
#: where decision records live, each document one record
ADR_DIRS: Final = ("docs/adr", "docs/adrs", "docs/decisions", "doc/adr", "adr", "decisions")
#: the most documents read from one repository (a repository with thousands of ADRs is read in name order)
MAX_DOCS: Final = 200
#: words that make a section a rule to follow, not a description
_RULE_WORDS = re.compile(
    r"\b(must(?:n['’]?t| not)?|never|always|do not|don['’]t|shall(?: not)?|required|forbidden|prohibited)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ProjectDocs:
    """The items read from a repository's documents, the ids each document gave, and what could not be read."""

    items: list[MemoryItem] = field(default_factory=list)
    ids_by_doc: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: documents that exist but could not be read (their items stay as they were)
    unreadable: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class DocsPlan:
    """What a sync of the documents does: the items to store, those to store again after the sync retired them
    (their section came back), the ids to retire (their section or document is gone), and the state to keep."""

    items: list[MemoryItem]
    returning: list[MemoryItem]
    retire: list[str]
    ids_by_doc: dict[str, list[str]]
    retired: list[str]


def find_project_docs(root: Path) -> list[Path]:
    """The project documents under ``root``, as paths relative to it: the root documents in ROOT_DOCS order, then
    each ADR directory's ``*.md`` in name order; at most MAX_DOCS."""
    found: list[Path] = [Path(name) for name in ROOT_DOCS if (root / name).is_file()]
    for directory in ADR_DIRS:
        folder = root / directory
        if not folder.is_dir():
            continue
        docs = sorted(p for p in folder.glob("*.md") if p.is_file() and p.name.lower() != "readme.md")
        found.extend(p.relative_to(root) for p in docs)
    return found[:MAX_DOCS]


def rule_kind(title: str, content: str) -> MemoryKind:
    """PRINCIPLE for a section that states a rule (a rule word in its heading or body), else CONVENTION."""
    return MemoryKind.PRINCIPLE if _RULE_WORDS.search(title) or _RULE_WORDS.search(content) else MemoryKind.CONVENTION


def parse_doc_text(
    text: str, relative: Path, *, project: str, now: datetime | None = None
) -> tuple[list[MemoryItem], list[LineError]]:
    """One document's items: decisions for an ADR, else a principle or a convention per section (:func:`rule_kind`)."""
    parsed = parse_markdown_text(text, path=relative, project=project, now=now)
    items = parsed.items
    if items and items[0].kind is not MemoryKind.DECISION:
        items = [item.model_copy(update={"kind": rule_kind(item.title, item.content)}) for item in items]
    return items, parsed.errors


def parse_project_docs(root: Path, *, project: str, now: datetime | None = None) -> ProjectDocs:
    """Every project document under ``root`` read into items (see the module docs). A document that cannot be
    read is an error line and gives no items (its earlier items are kept by the caller, not retired)."""
    result = ProjectDocs()
    for relative in find_project_docs(root):
        name = relative.as_posix()
        try:
            text = read_text(root / relative)
        except MemoryFileError as exc:
            result.errors.append(str(exc))
            result.unreadable.add(name)
            continue
        items, errors = parse_doc_text(text, relative, project=project, now=now)
        result.items.extend(items)
        result.ids_by_doc[name] = [item.id for item in items]
        result.errors.extend(str(e) for e in errors)
    return result


def plan_docs(docs: ProjectDocs, previous: dict[str, list[str]], previously_retired: set[str]) -> DocsPlan:
    """The sync of ``docs`` after the one that recorded ``previous`` (ids by document) and retired
    ``previously_retired``: an id no document gives any more is retired (a deleted section, a deleted document);
    a document that could not be read keeps its ids; an id the sync retired before and a document gives again
    comes back (stored with the marker that re-adds a forgotten item: only those the sync itself retired, never
    one a person forgot)."""
    ids_by_doc = dict(docs.ids_by_doc)
    for name in docs.unreadable:
        if name in previous:
            ids_by_doc[name] = list(previous[name])
    current = {item_id for ids in ids_by_doc.values() for item_id in ids}
    before = {item_id for ids in previous.values() for item_id in ids}
    retire = sorted(before - current)
    returning = [item for item in docs.items if item.id in previously_retired]
    items = [item for item in docs.items if item.id not in previously_retired]
    retired = sorted((previously_retired - current) | set(retire))
    return DocsPlan(items, returning, retire, ids_by_doc, retired)
