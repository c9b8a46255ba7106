"""The data dir is created 0700 (issue 10, finding 4): it holds the gateway secret, memories and logs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctxbus.private_dir import make_private_dirs


def test_private_dirs_are_made_0700_and_existing_ones_are_left(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "ctxbus"
    make_private_dirs(target)
    for path in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    os.chmod(target, 0o755)
    make_private_dirs(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        make_private_dirs(tmp_path / "file")
