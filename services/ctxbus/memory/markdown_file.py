"""Markdown documents (ADRs, conventions, style guides) chunked into memory items by heading.

The first ``#`` heading, when it comes before any other, is the document title.
Every other ``#``/``##``/``###`` heading starts a section; deeper headings stay in
the body of their section, and lines inside fenced code blocks are never headings.
Text between the title and the first section is a section of its own, titled
with the document title. Each non-empty section becomes one item:

- id: ``<file stem>#<heading slug>`` (a repeated slug gets ``-2``, ``-3`` ...;
  the text before the first section, or a document without sections, is
  ``<file stem>``), so ids stay stable while the headings do;
- title: the heading, prefixed with the document title (and, for a ``###``, its
  ``##``) unless the heading already says it;
- content: the section body, stripped, code blocks kept; a body over
  MAX_CONTENT_CHARS is split at paragraph (else line) boundaries into parts
  ``#slug``, ``#slug-part-2`` ...;
- kind: the one given, else inferred (:func:`infer_kind`);
- domains: from a front-matter ``domains:`` entry, else a ``Domains:`` line;
- source: the file path.

A section the model refuses (say, an id over its length limit) is a
:class:`LineError` at its heading's line. A file that cannot be read is a
:class:`MemoryFileError`. Setext (underlined) headings are not recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ctxbus.memory.model import MAX_CONTENT_CHARS, MemoryItem, MemoryKind
from ctxbus.memory.parse_result import LineError, ParsedMemories, read_text, validation_reason

#: Headings at this level or above split the document; deeper ones stay in the body.
MAX_SPLIT_LEVEL = 3
#: Longest heading slug used in an id, in characters.
MAX_SLUG_CHARS = 80
#: Longest item title (the model's limit).
MAX_TITLE_CHARS = 500
#: Slug used when a heading has no letters or digits.
FALLBACK_SLUG = "section"
#: Directory names whose documents are decisions when nothing else tells.
DECISION_DIRS: Final = frozenset({"adr", "adrs", "decisions", "decision-records"})

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONT_MATTER_FENCE = "---"
_FRONT_MATTER_ENDS = frozenset({"---", "..."})
_FRONT_DOMAINS = re.compile(r"^domains\s*:\s*(.*)$", re.IGNORECASE)
_FRONT_LIST_ENTRY = re.compile(r"^\s*-\s+(.+)$")
_DOMAINS_LINE = re.compile(r"^\s*(?:[-*]\s+)?[*_]{0,2}domains[*_]{0,2}\s*:\s*[*_]{0,2}\s*(.+)$", re.IGNORECASE)
_STATUS_LINE = re.compile(r"^\s*(?:[-*]\s+)?[*_]{0,2}status[*_]{0,2}\s*:", re.IGNORECASE)
_ADR_WORDS = re.compile(r"\b(adr|decision)s?\b", re.IGNORECASE)
_CONVENTION_WORDS = re.compile(r"\bconventions?\b|\bstyle[ \-_]?guides?\b", re.IGNORECASE)
_SLUG_DROP = re.compile(r"[^\w\- ]+")
_NAME_WRAPPERS = "'\"*_` "
_SLUG_DASHES = re.compile(r"[\s\-_]+")


@dataclass(slots=True)
class _Section:
    """A heading (None: the text before any section heading) and the lines under it."""

    level: int
    heading: str | None
    line: int
    parent: str | None = None
    body: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Document:
    title: str | None = None
    front_domains: list[str] | None = None
    sections: list[_Section] = field(default_factory=list)


def slugify(text: str) -> str:
    """A GitHub-style anchor slug: lower case, punctuation dropped, runs of blanks as one ``-``."""
    slug = _SLUG_DASHES.sub("-", _SLUG_DROP.sub("", text.lower())).strip("-")
    return slug[:MAX_SLUG_CHARS].rstrip("-") or FALLBACK_SLUG


def _split_list(value: str) -> list[str]:
    """``"[a, 'b']"`` or ``"a, **b**"`` -> ``["a", "b"]``: quotes and emphasis around each name dropped."""
    names = (v.strip().strip(_NAME_WRAPPERS) for v in value.strip().strip("[]").split(","))
    return [name for name in names if name]


def _front_matter(lines: list[str]) -> tuple[list[str] | None, int]:
    """Domains from a leading ``---`` block (None when it has none) and the index of the first body line."""
    if not lines or lines[0].strip() != _FRONT_MATTER_FENCE:
        return None, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in _FRONT_MATTER_ENDS), None)
    if end is None:
        return None, 0
    domains: list[str] | None = None
    for index in range(1, end):
        match = _FRONT_DOMAINS.match(lines[index])
        if not match:
            continue
        domains = _split_list(match.group(1))
        for entry in lines[index + 1 : end]:
            item = _FRONT_LIST_ENTRY.match(entry)
            if not item:
                break
            domains.extend(_split_list(item.group(1)))
    return domains, end + 1


def _read_document(lines: list[str]) -> _Document:
    domains, start = _front_matter(lines)
    doc = _Document(front_domains=domains)
    current = _Section(level=0, heading=None, line=start + 1)
    doc.sections.append(current)
    parent: str | None = None
    fence: str | None = None
    for index in range(start, len(lines)):
        line = lines[index]
        in_code = fence is not None
        fence = _fence_after(line, fence)
        heading = None if in_code or fence is not None else atx_heading(line)
        if heading is None or heading[0] > MAX_SPLIT_LEVEL:
            current.body.append(line)
            continue
        level, text = heading
        if level == 1 and doc.title is None and len(doc.sections) == 1 and not "".join(current.body).strip():
            doc.title = text
            current.line = index + 2
            continue
        parent = text if level <= 2 else parent
        current = _Section(level, text, index + 1, parent if level == 3 else None)
        doc.sections.append(current)
    return doc


def _body_domains(lines: list[str]) -> list[str]:
    for line in lines:
        match = _DOMAINS_LINE.match(line)
        if match:
            return _split_list(match.group(1))
    return []


def infer_kind(path: Path, title: str | None, headings: list[str], lines: list[str]) -> MemoryKind:
    """DECISION for an ADR-looking document, CONVENTION for a conventions one, else by directory.

    ADR-looking: "ADR"/"Decision" in the file name or title, a heading starting
    with "Decision", or a ``Status:`` line. Conventions: "convention"/"style
    guide" in the file name or title. Otherwise DECISION under an ``adr``/
    ``decisions`` directory, else CONVENTION.
    """
    name = f"{path.stem.replace('_', ' ').replace('-', ' ')} {title or ''}"
    if (
        _ADR_WORDS.search(name)
        or any(h.lower().startswith("decision") for h in headings)
        or any(_STATUS_LINE.match(line) for line in lines)
    ):
        return MemoryKind.DECISION
    if _CONVENTION_WORDS.search(name):
        return MemoryKind.CONVENTION
    if any(part.lower() in DECISION_DIRS for part in path.parent.parts):
        return MemoryKind.DECISION
    return MemoryKind.CONVENTION


def _title(doc_title: str | None, section: _Section) -> str:
    names = [n for n in (section.parent, section.heading) if n]
    if doc_title and not any(doc_title.lower() in n.lower() for n in names):
        names.insert(0, doc_title)
    title = names[0] + (": " + " / ".join(names[1:]) if len(names) > 1 else "") if names else ""
    return title[:MAX_TITLE_CHARS]


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line (``## Text ##``), else None.

    What ``^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`` matches, found without it: on a line of
    blanks and tabs after the text that pattern backtracks for seconds. Up to 3 spaces, 1 to 6 ``#``, then
    the end or a blank; the text runs to the closing ``#`` sequence (blanks before it) or the trailing blanks.
    """
    body = line.lstrip(" ")
    if len(line) - len(body) > 3:
        return None
    rest = body.lstrip("#")
    level = len(body) - len(rest)
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    text = rest.strip(" \t")
    unclosed = text.rstrip("#")
    if unclosed != text and unclosed[-1:] in (" ", "\t"):
        text = unclosed.rstrip(" \t")
    return level, text.strip()


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open code fence after ``line`` (None: not in a code block), given the one open before it."""
    match = _FENCE.match(line)
    if not match:
        return fence
    marker = match.group(1)
    if fence is None:
        return marker
    closes = marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker) :].strip()
    return None if closes else fence


def _prose(lines: list[str]) -> list[str]:
    """The lines of ``lines`` outside fenced code blocks."""
    kept: list[str] = []
    fence: str | None = None
    for line in lines:
        after = _fence_after(line, fence)
        if fence is None and after is None:
            kept.append(line)
        fence = after
    return kept


def _pieces(text: str, limit: int) -> list[tuple[str, str]]:
    """``text`` as (separator before it, piece) pairs, no piece over ``limit``: paragraphs, else lines, else cuts.

    Paragraphs break at blank lines outside fenced code; joining the pairs gives
    ``text`` back up to the blank lines between paragraphs.
    """
    blocks: list[list[str]] = [[]]
    fence: str | None = None
    for line in text.split("\n"):
        after = _fence_after(line, fence)
        if not line.strip() and fence is None and after is None:
            blocks.append([])
        else:
            blocks[-1].append(line)
        fence = after
    pieces: list[tuple[str, str]] = []
    for block in (b for b in blocks if b):
        separator = "\n\n"
        for line in block if len("\n".join(block)) > limit else ["\n".join(block)]:
            for start in range(0, max(len(line), 1), limit):
                pieces.append((separator, line[start : start + limit]))
                separator = ""
            separator = "\n"
    return pieces


def split_content(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut at paragraph, else line, else any boundary."""
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    current: list[str] = []  # joined once it is full (adding to a string would copy it for every piece)
    size = 0
    for separator, piece in _pieces(text, limit):
        if size and size + len(separator) + len(piece) <= limit:
            current += (separator, piece)
            size += len(separator) + len(piece)
        elif size:
            parts.append("".join(current))
            current, size = [piece], len(piece)
        else:  # nothing yet (or only empty pieces): the piece starts the part, without its separator
            current, size = [piece], len(piece)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _unique(base: str, seen: set[str], tried: dict[str, int]) -> str:
    """``base``, else ``base-2``, ``base-3`` ... whichever is not in ``seen`` (added to it).

    ``tried`` remembers the last number given for each base: every number below it is taken already
    (``seen`` only grows), so a document with thousands of equal headings is not quadratic.
    """
    n = tried.get(base, 1)
    candidate = base if n == 1 else f"{base}-{n}"
    while candidate in seen:
        n += 1
        candidate = f"{base}-{n}"
    tried[base] = n
    seen.add(candidate)
    return candidate


def parse_markdown_text(
    text: str, *, path: Path, project: str, kind: MemoryKind | None = None, now: datetime | None = None
) -> ParsedMemories:
    """Markdown text -> one item per non-empty section (see the module docs); ``path`` names and types them."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    doc = _read_document(lines)
    headings = [s.heading for s in doc.sections if s.heading is not None]
    prose = _prose([line for s in doc.sections for line in s.body])
    item_kind = kind or infer_kind(path, doc.title, headings, prose)
    domains = doc.front_domains if doc.front_domains is not None else _body_domains(prose)
    source, stem = str(path), path.stem
    times: dict[str, Any] = {"created_at": now, "updated_at": now} if now is not None else {}
    items: list[MemoryItem] = []
    errors: list[LineError] = []
    seen: set[str] = set()
    tried: dict[str, int] = {}
    for section in doc.sections:
        content = "\n".join(section.body).strip()
        if not content:
            continue
        slug = _unique(slugify(section.heading), seen, tried) if section.heading is not None else None
        base_title = _title(doc.title, section)
        parts = split_content(content)
        for number, part in enumerate(parts, start=1):
            part_slug = f"{slug}-part-{number}" if slug else f"part-{number}"
            anchor = slug if number == 1 else _unique(part_slug, seen, tried)
            item_id = f"{stem}#{anchor}" if anchor else stem
            suffix = f" (part {number} of {len(parts)})" if len(parts) > 1 else ""
            fields: dict[str, Any] = {
                "id": item_id,
                "project": project,
                "kind": item_kind,
                "title": (base_title[: MAX_TITLE_CHARS - len(suffix)] + suffix) if base_title else suffix.strip(),
                "content": part,
                "domains": domains,
                "source": source,
                **times,
            }
            try:
                items.append(MemoryItem.model_validate(fields))
            except ValidationError as exc:
                errors.append(LineError(section.line, item_id, validation_reason(exc), source))
    return ParsedMemories(items, errors)


def parse_markdown(
    path: Path, *, project: str, kind: MemoryKind | None = None, now: datetime | None = None
) -> ParsedMemories:
    """Read and chunk one markdown document (see :func:`parse_markdown_text`).

    ``now`` dates the items (else the model's default). Raises MemoryFileError
    when the file cannot be read or is not UTF-8.
    """
    return parse_markdown_text(read_text(path), path=path, project=project, kind=kind, now=now)
