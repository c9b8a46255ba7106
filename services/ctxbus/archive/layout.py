"""Where archived records live and what they hold (pure).

Layout: the one Kafka Connect's S3 sink writes with the ``TimeBasedPartitioner`` (hourly
``path.format``) and its default file naming, under the archive root::

    topics/<topic>/year=YYYY/month=MM/day=dd/hour=HH/<topic>+<partition>+<start offset, 10 digits>.avro

Each file is an Avro object container file (deflate) of ``ctxbus.archive.ArchivedRecord``: the
record's topic, partition, offset, timestamp (and its type), key, value (the Confluent-framed Avro event,
untouched) and headers, so any Avro tool reads the archive and ``schemas/`` decodes the values.

Offsets are the *archive's*: continuous across restarts. A restored broker numbers its records from 0
again (and from the oldest kept record once retention dropped older ones); the archiver adds a
per-partition base to the broker's offsets so the archive's offsets keep growing and never collide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro

RECORD_SCHEMA: Any = fastavro.parse_schema(
    {
        "type": "record",
        "name": "ArchivedRecord",
        "namespace": "ctxbus.archive",
        "doc": "One Kafka record as a ctxbus topic carried it; value is the event's bytes, untouched.",
        "fields": [
            {"name": "topic", "type": "string"},
            {"name": "partition", "type": "int"},
            {"name": "offset", "type": "long", "doc": "the archive's offset (continuous across restarts)"},
            {"name": "timestamp", "type": "long", "doc": "the record's timestamp, epoch milliseconds"},
            {"name": "timestamp_type", "type": "int", "default": 0, "doc": "0 CreateTime, 1 LogAppendTime"},
            {"name": "key", "type": ["null", "bytes"], "default": None},
            {"name": "value", "type": ["null", "bytes"], "default": None},
            {
                "name": "headers",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "ArchivedHeader",
                        "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": ["null", "bytes"]}],
                    },
                },
                "default": [],
            },
        ],
    }
)
SUFFIX = ".avro"
_NAME = re.compile(r"^(?P<topic>.+)\+(?P<partition>\d+)\+(?P<start>\d{10,})\.avro$")
_WINDOW = re.compile(r"year=(\d{4})/month=(\d{2})/day=(\d{2})/hour=(\d{2})$")


def window_of(timestamp_ms: int) -> datetime:
    """The hour a record belongs to (UTC)."""
    moment = datetime.fromtimestamp(max(0, timestamp_ms) / 1000.0, UTC)
    return moment.replace(minute=0, second=0, microsecond=0)


def file_path(root: Path, topic: str, partition: int, window: datetime, start_offset: int) -> Path:
    folder = root / "topics" / topic / f"year={window:%Y}" / f"month={window:%m}" / f"day={window:%d}"
    return folder / f"hour={window:%H}" / f"{topic}+{partition}+{start_offset:010d}{SUFFIX}"


@dataclass(frozen=True, slots=True)
class ArchivedFile:
    path: Path
    topic: str
    partition: int
    start_offset: int
    window: datetime
    size: int

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition


def parse_file(path: Path, root: Path, size: int) -> ArchivedFile | None:
    """The file's facts from its path, or None for a file that is not an archive file."""
    match = _NAME.match(path.name)
    if match is None:
        return None
    try:
        relative = path.parent.relative_to(root / "topics" / match.group("topic")).as_posix()
    except ValueError:
        return None
    when = _WINDOW.search(relative)
    if when is None:
        return None
    year, month, day, hour = (int(g) for g in when.groups())
    try:
        window = datetime(year, month, day, hour, tzinfo=UTC)
    except ValueError:
        return None
    return ArchivedFile(
        path, match.group("topic"), int(match.group("partition")), int(match.group("start")), window, size
    )


def ordered(files: Iterable[ArchivedFile]) -> list[ArchivedFile]:
    """Files of each partition by start offset, partitions by topic then number."""
    return sorted(files, key=lambda f: (f.topic, f.partition, f.start_offset))


def expired(
    files: Sequence[ArchivedFile], *, now: datetime, retention_days: float, retention_bytes: int
) -> list[ArchivedFile]:
    """The files retention removes: whole files, oldest window first, never a partition's newest file
    (it may still be written). First every file whose window ended more than ``retention_days`` ago, then
    the oldest until the archive is within ``retention_bytes``."""
    newest: dict[tuple[str, int], ArchivedFile] = {}
    for f in files:
        if f.key not in newest or f.start_offset > newest[f.key].start_offset:
            newest[f.key] = f
    keep_always = {id(f) for f in newest.values()}
    candidates = sorted((f for f in files if id(f) not in keep_always), key=lambda f: (f.window, f.start_offset))
    cutoff = now.timestamp() - retention_days * 86_400.0
    gone = [f for f in candidates if f.window.timestamp() + 3_600.0 <= cutoff]
    total = sum(f.size for f in files) - sum(f.size for f in gone)
    for f in candidates:
        if total <= retention_bytes:
            break
        if f in gone:
            continue
        gone.append(f)
        total -= f.size
    return gone
