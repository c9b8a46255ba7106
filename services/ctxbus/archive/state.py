"""The archive's small state file: per-partition offset bases and the services' committed positions.

``state.json`` under the archive root, written atomically (temp file + rename):
- ``bases``: ``"topic:partition" -> base``: archive offset = broker offset + base (0 until a restore
  renumbers a partition);
- ``groups``: ``group -> {"topic:partition": archive offset}``: the committed positions of every
  consumer group of the prefix, snapshotted with each flush, restored into a fresh broker.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


@dataclass
class ArchiveState:
    bases: dict[str, int] = field(default_factory=dict)
    groups: dict[str, dict[str, int]] = field(default_factory=dict)

    def base(self, topic: str, partition: int) -> int:
        return self.bases.get(tp_key(topic, partition), 0)

    @classmethod
    def load(cls, root: Path) -> ArchiveState:
        try:
            data: Any = json.loads((root / STATE_FILE).read_text())
            bases = {str(k): int(v) for k, v in data.get("bases", {}).items()}
            groups = {str(g): {str(k): int(v) for k, v in tps.items()} for g, tps in data.get("groups", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()
        return cls(bases, groups)

    def save(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{STATE_FILE}.tmp"
        with tmp.open("w", encoding="utf-8") as fo:
            json.dump({"bases": self.bases, "groups": self.groups}, fo, indent=1, sort_keys=True)
            fo.flush()
            os.fsync(fo.fileno())
        tmp.replace(root / STATE_FILE)
