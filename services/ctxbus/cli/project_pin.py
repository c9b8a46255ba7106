"""``ctxbus hooks install --project NAME``: the repository's project pinned in ``.claude/ctxbus.json``.

The hooks and every command read that file (:func:`ctxbus.hooks.project.project_source`), so one name holds for
the whole repository. Written like the settings files: the file keeps its indent, key order and text, pinning
the same name again changes no byte, and ``hooks uninstall`` gives back the bytes it had (or removes the file)
when nothing changed it since; a pin edited since is left alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbus.cli.errors import CliError
from ctxbus.hooks.install_record import InstallRecord
from ctxbus.hooks.project import CONFIG_FILE, git_root
from ctxbus.hooks.settings_text import dumps_like


def pin_path(cwd: str | None = None) -> Path:
    """``.claude/ctxbus.json`` at the root of the current directory's repository (else of the directory)."""
    here = cwd or os.getcwd()
    return Path(git_root(here) or here) / CONFIG_FILE


def pinned_name(value: object) -> str | None:
    """The name ``--project`` pins: a string (blank refused); the bare flag (True) or none (None, False): no pin."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    if not name:
        raise CliError("--project must not be blank")
    return name


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read it ({exc}); not touching it") from exc


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".ctxbus-tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


@dataclass(frozen=True, slots=True)
class PinChange:
    """What pinning ``name`` does to ``path``: its text before (None: no file) and after."""

    path: Path
    name: str
    before: str | None
    after: str

    @classmethod
    def plan(cls, path: Path, name: str) -> PinChange:
        before = read_text(path)
        data: Any = {}
        if before is not None and before.strip():
            try:
                data = json.loads(before)
            except ValueError as exc:
                raise CliError(f"{path}: not valid JSON ({exc}); not touching it") from exc
            if not isinstance(data, dict):
                raise CliError(f"{path}: not a JSON object; not touching it")
        if data.get("project") == name:
            return cls(path, name, before, before or dumps_like({"project": name}, None))
        return cls(path, name, before, dumps_like({**data, "project": name}, before))

    @property
    def changes(self) -> bool:
        return self.after != self.before

    def apply(self, data_dir: Path) -> str:
        """Write the pin (remembering the bytes before ctxbus first pinned); says what it did."""
        if not self.changes:
            return f"project {self.name!r} already pinned in {self.path}"
        record = InstallRecord.load(data_dir, self.path)
        if record is None or not record.written(self.before):  # keep what the file was before ctxbus first pinned
            record = InstallRecord(path=str(self.path.resolve()), before=self.before)
        write_text(self.path, self.after)
        record.after_sha256 = InstallRecord.digest(self.after)
        record.save(data_dir)
        return f"project {self.name!r} pinned in {self.path}"


def unpin(path: Path, data_dir: Path, *, dry_run: bool = False) -> tuple[str | None, str | None, str | None]:
    """Undo ctxbus's pin of ``path``: (the text now, the text after, a message); no pin of ctxbus's: no message."""
    record = InstallRecord.load(data_dir, path)
    if record is None:
        return None, None, None
    current = read_text(path)
    if not record.written(current):
        if not dry_run:
            record.forget(data_dir)
        return current, current, f"left {path} as it is: changed since ctxbus pinned the project"
    if not dry_run:
        if record.before is None:
            path.unlink()
        else:
            write_text(path, record.before)
        record.forget(data_dir)
    return current, record.before, f"project pin removed from {path}"
