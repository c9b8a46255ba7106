"""How far the archive of ``ctxbus up`` holds each partition of the embedded broker, in that broker's offsets: the
small file a publisher reads to know which of the records it sent the archive holds (``adapters/kafka/resend.py``).

``progress.json`` under the archive root, written by the archiver (``archive/archiver.py``) atomically (temp file and
rename, no fsync: it is a hint, rewritten with every flush) after each flush and when it stops:

- ``life``: one id per broker life, made when the archiver of a round is made (after the refill, before the services
  start): a publisher's acknowledgement belongs to the life the file named when it sent;
- ``archived``: ``"topic:partition" -> n``: the archive holds the broker's records 0..n-1 of that partition (flushed);
- ``lives``: the last LIVES_KEPT lives before, each with its final ``archived``: what a broker that died had in the
  archive, so a publisher can tell which of its records died with it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxbus.private_dir import make_private_dirs

PROGRESS_FILE = "progress.json"
#: lives before the current one the file remembers (a publisher idle over more restarts sends all it kept again)
LIVES_KEPT = 8


@dataclass(frozen=True)
class Progress:
    life: str
    archived: dict[str, int] = field(default_factory=dict)
    lives: dict[str, dict[str, int]] = field(default_factory=dict)


def progress_path(root: Path) -> Path:
    return root / PROGRESS_FILE


def read_progress(path: Path) -> Progress | None:
    """The file's content; None when it is missing or unreadable."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        archived = {str(k): int(v) for k, v in data.get("archived", {}).items()}
        lives = {str(life): {str(k): int(v) for k, v in tps.items()} for life, tps in data.get("lives", {}).items()}
        return Progress(str(data["life"]), archived, lives)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_progress(root: Path, progress: Progress) -> None:
    make_private_dirs(root)
    tmp = root / f".{PROGRESS_FILE}.{os.getpid()}.tmp"
    tmp.write_text(
        json.dumps({"life": progress.life, "archived": progress.archived, "lives": progress.lives}, sort_keys=True),
        encoding="utf-8",
    )
    tmp.replace(progress_path(root))


def start_life(root: Path, life: str) -> Progress:
    """A new broker life: the life the file named before goes to ``lives`` with its final ``archived``."""
    before = read_progress(progress_path(root))
    lives: dict[str, dict[str, int]] = {}
    if before is not None:
        lives = dict(list(before.lives.items())[-(LIVES_KEPT - 1) :]) if LIVES_KEPT > 1 else {}
        lives[before.life] = before.archived
    progress = Progress(life, {}, lives)
    write_progress(root, progress)
    return progress
