"""What a learning quotes of the work (pure): a command bare of the assignments before it, a path relative to the
project, and what an edit changed (its gist), never the contents of a file that holds secrets."""

from __future__ import annotations

import posixpath
import re
from difflib import SequenceMatcher

#: lines of an edit a gist shows, and characters of each
GIST_LINES = 3
GIST_LINE_CHARS = 120

_ENV_PREFIX = re.compile(r"^(?:\s*[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|\"[^\"]*\"|\S*)\s+)+")


def bare_command(command: str) -> str:
    """A command as a reader needs it: without the ``VAR=value`` assignments before it (they hold credentials more
    often than meaning)."""
    return _ENV_PREFIX.sub("", command).strip() or command


def relative(path: str, cwd: str | None) -> str:
    """``path`` relative to the session's directory when inside it, else as given."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) or path


#: files whose contents are never quoted (they hold secrets)
_SECRET_FILES = re.compile(
    r"(^|/)(\.env[^/]*|.*secret[^/]*|.*credential[^/]*|.*\.pem|.*\.key|id_rsa[^/]*|\.netrc|\.npmrc|\.pypirc)$", re.I
)


def quotable(path: str) -> bool:
    """Whether an edit's lines may be quoted (never those of ``.env`` files, keys, credentials)."""
    return not _SECRET_FILES.search(path)


def changed_lines(old: str, new: str) -> list[str]:
    """The lines an edit added (in ``new``, not in ``old``), stripped, non-trivial, in order."""
    before = {line.strip() for line in old.splitlines()}
    added = []
    for line in new.splitlines():
        stripped = line.strip()
        if stripped and stripped not in before and len(stripped) > 2 and stripped not in added:
            added.append(stripped)
    return added


#: how alike a removed line and an added one must be to read as one line changed (``v2beta2`` -> ``v2``)
_REPLACED_RATIO = 0.6
#: removed lines an added line is compared with (an edit that deletes a whole file's body compares with its head)
_REPLACED_CANDIDATES = 200


def gist(old: str, new: str) -> str:
    """A few of the lines an edit added, each clipped: what the fix was, in its own words. An added line that
    rewrites a removed one shows both (``apiVersion: autoscaling/v2beta2 -> apiVersion: autoscaling/v2``): what was
    wrong is often only in the line that went."""
    removed = changed_lines(new, old)[:_REPLACED_CANDIDATES]
    pieces = []
    for line in changed_lines(old, new)[:GIST_LINES]:
        likeness = ((SequenceMatcher(None, r, line).ratio(), r) for r in removed)
        ratio, was = max(likeness, key=lambda pair: pair[0], default=(0.0, ""))  # the first of equals, as before
        if was and ratio >= _REPLACED_RATIO:
            removed.remove(was)
            pieces.append(f"{was[:GIST_LINE_CHARS]} -> {line[:GIST_LINE_CHARS]}")
        else:
            pieces.append(line[:GIST_LINE_CHARS])
    return " / ".join(pieces)
