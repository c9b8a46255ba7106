"""Whether a memory still describes the code it names (pure).

An item that names files records, when it is stored, each file's sha256 and (in a git repository, when the file
was committed as it was) the commit (:class:`~ctxbus.memory.model.FileRef`). Later, what the files are now is
compared with that:

- a named file that no longer exists makes the item **stale** ("deleted");
- a file whose content changed is compared with its content at the recorded commit: when fewer than
  REWRITE_KEEP of its old lines (non-blank, stripped, counted with their repeats) are still there, it was
  rewritten past recognition and the item is **stale**; an edit that keeps most of the file is ordinary work;
- a changed file whose old content cannot be had (no commit recorded, no git) is not judged: a hash alone
  cannot tell an edit from a rewrite.

A stale item is down-weighted in ranking (:data:`STALE_WEIGHT`) and listed by ``ctxbus memory list --stale``,
never deleted; when its files come back (a revert), it is fresh again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

#: a changed file that keeps fewer than this share of its old lines was rewritten past recognition
REWRITE_KEEP = 0.3
#: what a stale item's score is multiplied by in ranking
STALE_WEIGHT = 0.5
#: longest stale reason kept (the model's limit is 500)
MAX_REASON_CHARS = 480


@dataclass(frozen=True, slots=True)
class FileNow:
    """What a named file is now, against what it was when the item was stored."""

    path: str
    exists: bool
    #: its bytes differ from the recorded sha256 (False when no hash was recorded)
    changed: bool = False
    #: the share of the recorded content's lines still present (None: the old content is not known)
    kept: float | None = None


def kept_share(old: str, new: str) -> float:
    """The share of ``old``'s non-blank lines (stripped, with their repeats) still present in ``new``; 1.0 for an
    old text without such lines."""
    before = Counter(line.strip() for line in old.splitlines() if line.strip())
    total = sum(before.values())
    if not total:
        return 1.0
    after = Counter(line.strip() for line in new.splitlines() if line.strip())
    return sum(min(count, after[line]) for line, count in before.items()) / total


def stale_reason(files: Sequence[FileNow]) -> str | None:
    """Why an item naming ``files`` is stale (deleted files first), or None while every file still stands."""
    deleted = [f.path for f in files if not f.exists]
    rewritten = [f for f in files if f.exists and f.changed and f.kept is not None and f.kept < REWRITE_KEEP]
    parts: list[str] = []
    if deleted:
        parts.append("deleted: " + ", ".join(deleted))
    if rewritten:
        parts.append(
            "rewritten: "
            + ", ".join(f"{f.path} ({round((f.kept or 0.0) * 100)}% of its lines remain)" for f in rewritten)
        )
    reason = "; ".join(parts)
    return reason[:MAX_REASON_CHARS] if reason else None
