"""Directories only their owner can enter (standard library only: the hook client uses this too).

ctxbus's data directory holds the gateway's secret, the memories, the injection record and the logs: every
place ctxbus creates it (or a directory on the way to it) creates it with mode 0700. Directories that already
exist are left as they are.
"""

from __future__ import annotations

import os

PRIVATE_DIR_MODE = 0o700


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and every missing parent with mode 0700 (the umask can only narrow it)."""
    current = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
