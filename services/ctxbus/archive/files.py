"""The archive's files: Avro object container files appended per partition and hour, read back in order.

A writer appends blocks and flushes them on demand (``flush``: what a SIGKILL can lose is what was not
flushed yet). A file cut short by a crash is read up to its last whole block (the rest is counted);
a process that starts again never appends to an existing file, it starts a new one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import fastavro
import structlog

from ctxbus.archive.layout import RECORD_SCHEMA, SUFFIX, ArchivedFile, file_path, ordered, parse_file, window_of

log = structlog.get_logger("ctxbus.archive")

#: bytes buffered before a block is written without being asked (a flush writes it whatever its size)
BLOCK_BYTES = 1 << 20


def scan(root: Path) -> list[ArchivedFile]:
    """Every archive file under ``root``, in partition and offset order."""
    base = root / "topics"
    if not base.is_dir():
        return []
    found = []
    for dirpath, _dirs, names in os.walk(base):
        for name in names:
            if not name.endswith(SUFFIX):
                continue
            path = Path(dirpath) / name
            try:
                size = path.stat().st_size
            except OSError:
                continue
            parsed = parse_file(path, root, size)
            if parsed is not None:
                found.append(parsed)
    return ordered(found)


@dataclass
class ReadStats:
    files: int = 0
    records: int = 0
    damaged_files: list[str] = field(default_factory=list)


def read_file(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """The file's records; a tail cut short by a crash ends the file (and is counted in ``stats``)."""
    if stats is not None:
        stats.files += 1
    try:
        with path.open("rb") as fo:
            for record in fastavro.reader(fo):
                if stats is not None:
                    stats.records += 1
                yield record  # type: ignore[misc]
    except (ValueError, EOFError, OSError, StopIteration) as exc:
        log.warning("archive_file_damaged", path=str(path), error=repr(exc))
        if stats is not None:
            stats.damaged_files.append(str(path))


def read_partition(files: list[ArchivedFile], stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Records of one partition's files (given in offset order), each offset once, in order."""
    last = -1
    for f in files:
        for record in read_file(f.path, stats):
            if record["offset"] > last:
                last = record["offset"]
                yield record


class PartitionWriter:
    """Appends one partition's records; a new file when the hour moves on (never for an older hour)."""

    def __init__(self, root: Path, topic: str, partition: int) -> None:
        self._root, self.topic, self.partition = root, topic, partition
        self._fo: IO[bytes] | None = None
        self._writer: Any = None
        self._window: datetime | None = None
        self.path: Path | None = None
        self.pending = 0

    def append(self, record: dict[str, Any]) -> None:
        window = window_of(record["timestamp"])
        if self._writer is None or (self._window is not None and window > self._window):
            self._open(window, record["offset"])
        self._writer.write(record)
        self.pending += 1

    def _open(self, window: datetime, start_offset: int) -> None:
        self.close()
        path = file_path(self._root, self.topic, self.partition, window, start_offset)
        path.parent.mkdir(parents=True, exist_ok=True)
        # "xb": a name is never reused (offsets only grow); a leftover means a bug, and it must not be overwritten
        self._fo = path.open("xb")
        self._writer = fastavro.write.Writer(self._fo, RECORD_SCHEMA, codec="deflate", sync_interval=BLOCK_BYTES)
        self._window, self.path = window, path

    def flush(self) -> None:
        if self._writer is not None and self.pending:
            self._writer.flush()
            assert self._fo is not None
            self._fo.flush()
            os.fsync(self._fo.fileno())
            self.pending = 0

    def close(self) -> None:
        if self._writer is not None:
            self.flush()
            assert self._fo is not None
            with contextlib.suppress(OSError):
                self._fo.close()
        self._fo, self._writer, self._window = None, None, None
