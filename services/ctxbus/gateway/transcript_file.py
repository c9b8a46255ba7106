"""Reading Claude Code's transcript file incrementally (the gateway's only file I/O for outcomes).

The transcript is append-only JSON lines. The gateway remembers, per session, how many bytes it
has read (the cursor); the next read starts there and stops at the last complete line, so every
line is read once. Without a cursor (a session first seen at Stop, or a gateway restarted
mid-session) only the last turn is read: the entries after the last user prompt, which no earlier
Stop can have read. Reads are bounded: at most ``MAX_READ_BYTES`` from the end.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from ctxbus.core.outcome_rules import AssistantReport, CheckRun, Evidence, Feedback
from ctxbus.core.transcript import evidence_in, last_turn_start, parse_lines
from ctxbus.redact.default import redact_text

#: the most of a transcript one read takes (from its end); a longer increment loses its oldest lines
MAX_READ_BYTES = 8_000_000
#: how much of the end is scanned for an assistant entry when a session is first seen at a prompt
_ANSWER_SCAN_BYTES = 262_144
#: shell calls remembered while their result has not been read yet
MAX_OPEN_CALLS = 200


@dataclass(frozen=True, slots=True)
class TranscriptRead:
    evidence: list[Evidence]
    cursor: int
    #: the read started at the last user prompt (no cursor) or skipped lines (too long)
    partial: bool


def usable(path: object) -> str | None:
    """The path when it names a regular ``.jsonl`` file, else None (the gateway reads nothing else)."""
    if not isinstance(path, str) or not path.endswith(".jsonl"):
        return None
    return path if os.path.isfile(path) else None


def size_of(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def read_since(path: str | None, cursor: int | None, calls: dict[str, str] | None = None) -> TranscriptRead | None:
    """The evidence in the lines after ``cursor`` (None: in the last turn); None when unreadable.
    ``calls`` holds shell calls read earlier whose result had not been written yet (updated)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            exact = cursor is not None and cursor <= size
            start = cursor if exact and cursor is not None else 0
            skipped = size - start > MAX_READ_BYTES
            if skipped:
                start = size - MAX_READ_BYTES
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return None
    if start > 0 and (skipped or not exact):
        newline = data.find(b"\n")
        data, start = (data[newline + 1 :], start + newline + 1) if newline >= 0 else (b"", size)
    end = data.rfind(b"\n") + 1
    entries = parse_lines(data[:end].splitlines())
    if not exact:
        entries = entries[last_turn_start(entries) :]
    calls = {} if calls is None else calls
    evidence = [redacted(e) for e in evidence_in(entries, calls=calls)]
    for stale in list(calls)[:-MAX_OPEN_CALLS]:
        del calls[stale]
    return TranscriptRead(evidence, start + end, partial=skipped or not exact)


def redacted(evidence: Evidence) -> Evidence:
    """Evidence with the text it took from the transcript redacted (a command, a check's output, someone's words):
    what the gateway keeps, publishes as outcome notes or captures holds no secret (docs/privacy.md). The evidence
    is small; redacting it costs far less than redacting the transcript it came from."""
    if isinstance(evidence, CheckRun):
        return dataclasses.replace(evidence, command=redact_text(evidence.command), detail=redact_text(evidence.detail))
    if isinstance(evidence, Feedback | AssistantReport):
        return dataclasses.replace(evidence, phrase=redact_text(evidence.phrase))
    return evidence


def has_answer(path: str | None) -> bool:
    """Whether the transcript's end holds an assistant entry (the session had a turn before this prompt)."""
    if path is None:
        return False
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - _ANSWER_SCAN_BYTES))
            tail = fh.read()
    except OSError:
        return False
    return b'"type":"assistant"' in tail or b'"type": "assistant"' in tail
