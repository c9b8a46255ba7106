"""Which files a text mentions, and whether a memory item mentions one of them (seed 004's file boost).

Holds: the path-like tokens of a text that name files (``extract_mentioned_files``), a request's files
(``mentioned_files_for``: its own list, then those its text mentions) and whether an item's content, title,
example reference or tags mention one of them (``item_mentions``). Bounded by ``ctxbus.core.bounds``, linear on
adversarial text. ``ctxbus.core.policy`` boosts the items that do.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from ctxbus.core.bounds import MAX_MENTIONED_FILES, MAX_PATH_CHARS, MENTION_SCAN_CHARS, prefix
from ctxbus.memory.model import MemoryItem

#: Extensions that make a bare name (no directory) a file mention; paths with a ``/`` take any.
_EXTENSION_WORDS = (
    "py pyi ipynb ts tsx js jsx mjs cjs md mdx rst txt json jsonl yaml yml toml ini cfg conf env lock "
    "sh bash zsh fish ps1 go rs java kt kts scala c h cc cpp hpp cs rb php swift m mm dart lua pl ex exs "
    "erl hs ml jl r sql html htm css scss sass less vue svelte xml csv tsv proto avsc graphql gql tf hcl "
    "gradle mk cmake dockerfile sol zig nim"
)
KNOWN_EXTENSIONS = frozenset(_EXTENSION_WORDS.split())
#: Extensionless file names recognised as they are usually written.
_BARE_NAME_WORDS = (
    "Makefile GNUmakefile makefile Dockerfile Containerfile Jenkinsfile Gemfile Rakefile Procfile "
    "Vagrantfile Justfile Brewfile LICENSE README CODEOWNERS CHANGELOG"
)
KNOWN_BARE_NAMES = frozenset(_BARE_NAME_WORDS.split())
#: Dot-files recognised without a directory (with one, any ``.name`` is taken).
KNOWN_DOTFILES = frozenset(
    (".gitignore", ".gitattributes", ".dockerignore", ".editorconfig", ".env", ".envrc", ".bashrc", ".zshrc")
)

#: A URL or a ``www.`` address: ``\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+|\bwww\.\S+``, written so that it stays
#: linear. Tried from every letter of a run of scheme characters, the plain form re-scans the run each time
#: (quadratic on ``a+a+a+...``); here a run is scanned once, from its start: a lookahead checks that ``://``
#: follows it, then ``keep`` (given back by ``_drop_url``) runs lazily to the first letter at a word
#: boundary, where the plain form's match would begin.
_URL = re.compile(
    r"(?<![a-zA-Z0-9+.-])(?=[a-zA-Z0-9+.-]*+://)(?P<keep>[a-zA-Z0-9+.-]*?)(?<!\w)[a-zA-Z][a-zA-Z0-9+.-]*+://\S+"
    r"|\bwww\.\S+"
)
_CANDIDATE = re.compile(r"[\w./*~+-]+")
_EXTENSION = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_STEM_LETTER = re.compile(r"[A-Za-z_*]")
_DOTFILE = re.compile(r"\.[A-Za-z][\w.-]*")
_LEADING_DOT_SLASHES = re.compile(r"(?:\./)*")


def _normalise_path(path: str) -> str:
    path = path.strip().rstrip(".")
    leading = _LEADING_DOT_SLASHES.match(path)  # one pass: slicing "./" off in a loop is quadratic
    return path[leading.end() :] if leading else path


def _is_file_name(name: str, *, in_directory: bool) -> bool:
    """Whether the last segment of a path-like token names a file (not a version, not a method call).

    A name with an extension is a stem holding a letter, ``_`` or ``*`` and, after the last dot, an
    extension of a letter then letters or digits (split with ``rpartition``, not a backtracking pattern).
    """
    if name in KNOWN_BARE_NAMES or name in KNOWN_DOTFILES:
        return True
    if in_directory and _DOTFILE.fullmatch(name) and name.count(".") == 1:
        return True
    stem, dot, ext = name.rpartition(".")
    if not dot or not _EXTENSION.fullmatch(ext) or not _STEM_LETTER.search(stem):
        return False
    return in_directory or ext.lower() in KNOWN_EXTENSIONS


def _drop_url(match: re.Match[str]) -> str:
    return (match.group("keep") or "") + " "


def _candidates(text: str) -> list[str]:
    """The path-like tokens of the first MENTION_SCAN_CHARS characters of ``text``, URLs left out; a token cut
    by that limit is left out too (it would be part of a path)."""
    window = prefix(text, MENTION_SCAN_CHARS)
    cleaned = _URL.sub(_drop_url, window)
    found = _CANDIDATE.findall(cleaned)
    cut_in_a_token = len(window) < len(text) and _CANDIDATE.match(text, len(window)) is not None
    if found and cut_in_a_token and _CANDIDATE.fullmatch(cleaned[-1:]):
        found.pop()  # the last token runs on past the window
    return found


def extract_mentioned_files(text: str) -> tuple[str, ...]:
    """File paths and globs mentioned in ``text``, first mention first, each once.

    Taken: ``src/auth/login.py``, ``a/b.ts:42`` (as ``a/b.ts``), ``./x.py`` (as ``x.py``),
    ``Makefile``, ``.gitignore``, ``*.md``, ``src/**/*.py``. Not taken: URLs,
    version numbers (``3.11``, ``v1.2.3``), dotted names with no file extension
    (``os.path.join``, ``e.g.``), directories (``src/auth/``). A bare name needs a
    known extension; a name in a directory takes any extension that starts with a letter.

    Bounded (``ctxbus.core.bounds``): only the first MENTION_SCAN_CHARS characters are read, a token
    longer than MAX_PATH_CHARS is not a path, and at most MAX_MENTIONED_FILES files are returned.
    """
    found: dict[str, None] = {}
    for raw in _candidates(text):
        if len(raw) > MAX_PATH_CHARS:
            continue
        path = _normalise_path(raw)
        if not path or path.endswith("/") or "//" in path:
            continue
        in_directory = "/" in path
        if _is_file_name(path.rsplit("/", 1)[-1], in_directory=in_directory):
            found.setdefault(path, None)
            if len(found) == MAX_MENTIONED_FILES:
                break
    return tuple(found)


def mentioned_files_for(request_files: Sequence[str], request_text: str) -> tuple[str, ...]:
    """The files a request is about: its own list first (normalised; longer than MAX_PATH_CHARS dropped), then
    those ``request_text`` mentions; each once, at most MAX_MENTIONED_FILES."""
    own = (_normalise_path(f) for f in request_files if len(f) <= MAX_PATH_CHARS)
    files = dict.fromkeys(p for p in own if p)
    files.update(dict.fromkeys(extract_mentioned_files(request_text)))
    return tuple(files)[:MAX_MENTIONED_FILES]


def _mention_matches(requested: str, mentioned: str) -> bool:
    """Same file: equal, one a path suffix of the other, or ``mentioned`` matching a requested glob."""
    if "*" in requested:
        return fnmatch.fnmatchcase(mentioned, requested)
    if requested == mentioned:
        return True
    shorter, longer = sorted((requested, mentioned), key=len)
    return longer.endswith("/" + shorter.lstrip("/"))


def _could_mention(folded_text: str, wanted: str) -> bool:
    """Whether ``folded_text`` may mention ``wanted`` (both case-folded): a match of a plain path shares its last
    segment, which must then appear in the text; a glob may match anything."""
    if any(c in wanted for c in "*?["):
        return True
    return wanted.rsplit("/", 1)[-1] in folded_text


def item_mentions(item: MemoryItem, files: Iterable[str]) -> bool:
    """Whether the item's content, title, example reference or tags mention one of ``files`` (case ignored).

    A field that cannot mention any of the files (none of their names appears in it) is not searched.
    """
    wanted = [_normalise_path(f).casefold() for f in files if f.strip() and len(f) <= MAX_PATH_CHARS]
    if not wanted:
        return False
    texts = (item.content, item.title, item.example_reference or "", *item.tags)
    mentioned: set[str] = set()
    for text in texts:
        folded = text.casefold()
        if any(_could_mention(folded, w) for w in wanted):
            mentioned.update(m.casefold() for m in extract_mentioned_files(text))
    return any(_mention_matches(w, m) for w in wanted for m in mentioned)
