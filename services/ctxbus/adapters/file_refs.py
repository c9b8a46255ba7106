"""The files an item names: recorded when it is stored, looked at again to tell whether it is stale.

:func:`with_files` gives an imported item that mentions paths (``ledger/money.py``) the files of the repository
at ``root`` it names, each with its sha256 and, when the file is committed as it is, the commit
(:class:`~ctxbus.memory.model.FileRef`); captured items name their files themselves. :func:`restamped` looks
at the named files again and returns the items whose staleness changed (the rules: :mod:`ctxbus.core.staleness`).

I/O: reading the named files (at most MAX_FILE_BYTES each) and asking ``git`` (``rev-parse``, ``ls-tree``,
``show``; each call bounded by GIT_TIMEOUT_S). Without git, or outside a repository, the hashes are recorded
and a deleted file is still noticed; a rewrite is judged only with the content at a recorded commit.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath

from ctxbus.core.mentions import extract_mentioned_files
from ctxbus.core.staleness import FileNow, kept_share, stale_reason
from ctxbus.memory.model import MAX_FILES, FileRef, MemoryItem

#: files larger than this are not hashed (nor judged)
MAX_FILE_BYTES = 5 * 1024 * 1024
#: how long one git call may take
GIT_TIMEOUT_S = 5.0
_GLOB = frozenset("*?[")


def _git(root: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def blob_id(data: bytes) -> str:
    """git's object id of a blob with ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def relative(path: str, root: Path) -> str | None:
    """``path`` relative to ``root`` (POSIX), for a relative path or an absolute one under ``root``; None for a
    path outside it (or climbing out with ``..``)."""
    candidate = PurePosixPath(path.replace("\\", "/"))
    if candidate.is_absolute():
        try:
            candidate = PurePosixPath(Path(path).resolve().relative_to(root.resolve()).as_posix())
        except (ValueError, OSError):
            return None
    parts = [p for p in candidate.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _read(file: Path) -> bytes | None:
    try:
        if not file.is_file() or file.stat().st_size > MAX_FILE_BYTES:
            return None
        return file.read_bytes()
    except OSError:
        return None


def refs_for(paths: Iterable[str], root: Path) -> tuple[FileRef, ...]:
    """FileRefs of the named files that exist under ``root`` (relative paths, each once, at most MAX_FILES)."""
    found: dict[str, bytes] = {}
    for path in paths:
        rel = relative(path, root)
        if rel is None or rel in found or any(c in _GLOB for c in rel):
            continue
        data = _read(root / rel)
        if data is not None:
            found[rel] = data
        if len(found) == MAX_FILES:
            break
    if not found:
        return ()
    head = _git(root, "rev-parse", "HEAD")
    committed: dict[str, str] = {}
    if head is not None:
        listing = _git(root, "ls-tree", "-r", "HEAD", "--", *found) or b""
        for line in listing.decode(errors="replace").splitlines():
            meta, _, name = line.partition("\t")
            fields = meta.split()
            if len(fields) == 3 and fields[1] == "blob":
                committed[name] = fields[2]
    commit = head.decode().strip() if head else None
    return tuple(
        FileRef(
            path=rel,
            sha256=hashlib.sha256(data).hexdigest(),
            commit=commit if committed.get(rel) == blob_id(data) else None,
        )
        for rel, data in found.items()
    )


def mentioned_paths(item: MemoryItem) -> list[str]:
    """The file paths an item's title and content mention (globs left out)."""
    return [p for p in extract_mentioned_files(f"{item.title}\n{item.content}") if not _GLOB & set(p)]


def with_files(items: Sequence[MemoryItem], root: Path) -> list[MemoryItem]:
    """The items, each that names no files yet given the existing files under ``root`` it mentions."""
    out: list[MemoryItem] = []
    for item in items:
        if item.files:
            out.append(item)
            continue
        refs = refs_for(mentioned_paths(item), root)
        out.append(item.model_copy(update={"files": refs}) if refs else item)
    return out


#: one look at a file in one pass: (its bytes, their sha256), or None when unreadable
_Seen = dict[str, tuple[bytes, str] | None]


def _look(root: Path, rel: str, seen: _Seen) -> tuple[bytes, str] | None:
    """A file's bytes and digest, read once per pass however many items name it."""
    if rel not in seen:
        data = _read(root / rel)
        seen[rel] = None if data is None else (data, hashlib.sha256(data).hexdigest())
    return seen[rel]


def files_now(refs: Sequence[FileRef], root: Path, seen: _Seen | None = None) -> list[FileNow]:
    """What each named file under ``root`` is now (a file outside ``root`` is not judged); ``seen`` carries the
    files already read in this pass."""
    seen = {} if seen is None else seen
    now: list[FileNow] = []
    for ref in refs:
        rel = relative(ref.path, root)
        if rel is None:
            continue
        looked = _look(root, rel, seen)
        if looked is None:
            if not (root / rel).exists():
                now.append(FileNow(ref.path, exists=False))
            continue
        data, digest = looked
        changed = ref.sha256 is not None and digest != ref.sha256
        kept: float | None = None
        if changed and ref.commit:
            old = _git(root, "show", f"{ref.commit}:{rel}")
            if old is not None:
                kept = kept_share(old.decode(errors="replace"), data.decode(errors="replace"))
        now.append(FileNow(ref.path, exists=True, changed=changed, kept=kept))
    return now


def restamped(items: Iterable[MemoryItem], root: Path, at: datetime) -> list[MemoryItem]:
    """The items naming files whose staleness changed: newly stale (``stale`` = why, ``stale_since`` = ``at``),
    or fresh again (both cleared)."""
    changed: list[MemoryItem] = []
    seen: _Seen = {}  # a file many items name is read and hashed once
    for item in items:
        if not item.files or not item.active:
            continue
        reason = stale_reason(files_now(item.files, root, seen))
        if reason == item.stale:
            continue
        if reason is None:
            changed.append(item.model_copy(update={"stale": None, "stale_since": None}))
        else:
            since = item.stale_since if item.stale else at
            changed.append(item.model_copy(update={"stale": reason, "stale_since": since}))
    return changed
