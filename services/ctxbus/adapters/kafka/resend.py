"""What a publisher on ``ctxbus up``'s embedded broker sent and the archive does not hold yet, sent again after the
broker died (issue 27: no acknowledged request lost).

The embedded broker keeps records in memory only. A record it acknowledged and the archiver had not read when it was
killed is gone with it, and the refill of the next broker (from the archive) does not bring it back. So every
ctxbus publisher on the embedded broker (``EventPublisher.send``: requests, the gateway's events, the CLI's) keeps
what it sent, in memory and bounded (KEEP_LIMIT records), with the broker life it went to and the offset the broker
gave it, until the archive's progress file (``adapters/kafka/archive_progress.py``) says the archive holds it. When
the file names a new life (a new broker, refilled), each kept record of an earlier life that the archive did not hold
when that broker ended is sent again, before the publisher's next record; the rest are dropped. Consumers skip a
record they answered already (by event id: the runners' answered ledger, the SQLite records' primary keys), and the
replay counts a request sent twice once.

The keeper is one per archive and process (``keeper_for``): the publishers of ``ctxbus up``'s next round take over
what the last round's kept. Pure logic but for reading the file (a ``stat`` per send, the file read when it changed).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import structlog

from ctxbus.adapters.kafka.archive_progress import Progress, progress_path, read_progress

log = structlog.get_logger("ctxbus.publisher")

#: records a keeper holds at most (the oldest go first): at 5 requests/s, more than half an hour of them; the archive
#: reads a record within about a second, so only a broker death keeps more than a few
KEEP_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Kept:
    """A record the broker acknowledged: where it went, and what to send again."""

    life: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int | None


class Keeper:
    """The records sent to one embedded broker's archive's topics that it may not hold yet."""

    def __init__(self, progress_file: Path, limit: int = KEEP_LIMIT) -> None:
        self._path = progress_file
        self._limit = limit
        self._stamp: tuple[int, int, int] | None = None
        self._progress: Progress | None = None
        self._kept: deque[Kept] = deque()
        #: the progress the kept records were last sorted against, and whether one kept since is of another life:
        #: nothing can become due or archived until the file changes, so ``due`` (before every send) scans only then
        self._sorted_for: Progress | None = None
        self._foreign = False
        self.dropped = 0
        self.resent = 0

    def refresh(self) -> Progress | None:
        """The progress file as it is now (read again only when it changed)."""
        try:
            st = os.stat(self._path)
        except OSError:
            return self._progress
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            progress = read_progress(self._path)
            if progress is not None:
                self._stamp, self._progress = stamp, progress
        return self._progress

    @property
    def life(self) -> str | None:
        """The broker life records sent now go to (None: no archive progress yet: nothing is kept)."""
        progress = self.refresh()
        return progress.life if progress is not None else None

    def keep(self, record: Kept) -> None:
        self._kept.append(record)
        if self._progress is None or record.life != self._progress.life:
            self._foreign = True
        while len(self._kept) > self._limit:
            self._kept.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("resend_buffer_full", dropped=self.dropped, limit=self._limit)

    def __len__(self) -> int:
        return len(self._kept)

    def due(self) -> list[Kept]:
        """Take the kept records to send again now (in the order they were sent), forgetting those the archive holds:
        of the current life, those below its archived end; of an earlier life, those below that life's final end are
        held, the others died with their broker and are due (all of a life the file no longer knows)."""
        progress = self.refresh()
        if progress is None or not self._kept or (progress is self._sorted_for and not self._foreign):
            return []
        self._sorted_for, self._foreign = progress, False
        due: list[Kept] = []
        left: deque[Kept] = deque()
        for record in self._kept:
            tp = f"{record.topic}:{record.partition}"
            if record.life == progress.life:
                if record.offset >= progress.archived.get(tp, 0):
                    left.append(record)
            elif record.offset >= progress.lives.get(record.life, {}).get(tp, 0):
                due.append(record)
        self._kept = left
        return due


_keepers: dict[Path, Keeper] = {}


def keeper_for(archive_root: Path) -> Keeper:
    """The process's keeper for the archive at ``archive_root``."""
    path = progress_path(archive_root)
    keeper = _keepers.get(path)
    if keeper is None:
        keeper = _keepers[path] = Keeper(path)
    return keeper
