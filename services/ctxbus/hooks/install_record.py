"""What ``ctxbus hooks install`` remembers about a settings file, so ``uninstall`` can give back its bytes.

Kept outside the repository (``DATA_DIR/hooks-install/<hash of the file's path>.json``): the file's text
before ctxbus first installed into it (None: there was no file) and the hash of what ctxbus wrote. When
the file still holds exactly that, uninstall restores the original bytes; when someone changed it since,
uninstall removes only ctxbus's entries and keeps the event lists the user had, empty or not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FOLDER = "hooks-install"


def _file(data_dir: Path, settings_file: Path) -> Path:
    key = hashlib.sha256(str(settings_file.resolve()).encode()).hexdigest()[:24]
    return data_dir / FOLDER / f"{key}.json"


@dataclass
class InstallRecord:
    path: str
    before: str | None
    after_sha256: str = ""

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def written(self, current: str | None) -> bool:
        """Whether the file still holds exactly what ctxbus wrote."""
        return current is not None and bool(self.after_sha256) and self.digest(current) == self.after_sha256

    def empty_events(self) -> tuple[str, ...]:
        """The hook events the file had before the install (their lists, empty ones too, stay)."""
        try:
            before: Any = json.loads(self.before or "{}")
        except ValueError:
            return ()
        hooks = before.get("hooks") if isinstance(before, dict) else None
        return tuple(hooks) if isinstance(hooks, dict) else ()

    @classmethod
    def load(cls, data_dir: Path, settings_file: Path) -> InstallRecord | None:
        try:
            raw = json.loads(_file(data_dir, settings_file).read_text(encoding="utf-8"))
            return cls(path=str(raw["path"]), before=raw["before"], after_sha256=str(raw.get("after_sha256", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, data_dir: Path) -> None:
        target = _file(data_dir, Path(self.path))
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), ensure_ascii=False), encoding="utf-8")
        os.chmod(tmp, 0o600)  # it may hold a copy of the user's settings
        tmp.replace(target)

    def forget(self, data_dir: Path) -> None:
        with contextlib.suppress(OSError):
            _file(data_dir, Path(self.path)).unlink()
