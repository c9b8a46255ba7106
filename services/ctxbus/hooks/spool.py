"""Fallback injections kept on disk until the bus takes them (standard library only: the hook client uses it).

When a hook is answered from the learned-pattern file (seed 002's fallback: the gateway could not be reached,
or the pipeline did not answer in time), the bus never saw that injection. Each such answer is written here, one
small JSON file per answer under ``DATA_DIR/fallback-spool/`` (atomically: a temporary file renamed into place),
and the gateway's shipper (:mod:`ctxbus.gateway.fallback_shipper`) publishes it as a ``context.injected`` event
once the bus answers, then deletes the file: so the dashboard, replay and learning count fallbacks too.

A shipper claims a file by renaming it (``*.json`` -> ``*.json.claimed``): one claimant per file, whatever
the number of gateways. A claim left by a shipper that died is taken again after ``STALE_CLAIM_S``. A file
that does not parse is renamed ``*.bad`` and kept for a person to look at. At most ``MAX_SPOOLED`` files
are kept: past that a new fallback is not recorded (logged by the caller), the older ones stay.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from typing import Any

SPOOL_DIR = "fallback-spool"
#: the record's format
SPOOL_VERSION = 1
#: most answers kept waiting for the bus
MAX_SPOOLED = 10_000
#: a claim older than this (seconds) belongs to a shipper that died: it is taken again
STALE_CLAIM_S = 300.0
#: the most characters of a fallback's context kept (Claude Code's own limit on additional context)
MAX_CONTEXT_CHARS = 10_000
READY = ".json"
CLAIMED = ".json.claimed"
BAD = ".json.bad"

#: where the fallback answer came from (the ``context.injected`` event's ``context_source``): the gateway read
#: the pattern file because the pipeline did not answer in time; the hook client read it on its own because
#: the gateway could not be reached
GATEWAY_FILE = "persistence_file"
CLIENT_FILE = "fallback_static"


def spool_dir(data_dir: str) -> str:
    return os.path.join(data_dir, SPOOL_DIR)


def fallback_record(
    *,
    project: str,
    session_id: str,
    hook_event: str,
    source: str,
    why: str,
    context: str,
    pattern_count: int,
    retrieval_ms: int,
    min_confidence: float | None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    """One fallback answer as the spool keeps it (plain JSON values)."""
    return {
        "v": SPOOL_VERSION,
        "id": uuid.uuid4().hex,
        "at": time.time() if at is None else at,
        "project": project,
        "session_id": session_id,
        "hook_event": hook_event,
        "source": source,
        "why": why,
        "context": context[:MAX_CONTEXT_CHARS],
        "pattern_count": pattern_count,
        "retrieval_ms": retrieval_ms,
        "min_confidence": min_confidence,
        "correlation_id": correlation_id,
        "causation_id": causation_id,
    }


def _names(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def record(data_dir: str, entry: dict[str, Any]) -> str | None:
    """Write ``entry`` into the spool; its path, or None when the spool is full. Raises OSError when it
    cannot be written (the caller logs it: a hook still answers)."""
    from ctxbus.private_dir import make_private_dirs  # noqa: PLC0415

    directory = spool_dir(data_dir)
    make_private_dirs(directory)
    if sum(1 for n in _names(directory) if n.endswith((READY, CLAIMED))) >= MAX_SPOOLED:
        return None
    name = f"{time.time_ns():020d}-{entry['id']}"  # oldest first, by when it was written
    tmp = os.path.join(directory, f".{name}.tmp")
    path = os.path.join(directory, name + READY)
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(entry, fh)
    os.replace(tmp, path)
    return path


def pending(data_dir: str) -> int:
    """How many answers wait for the bus (claimed ones included)."""
    return sum(1 for n in _names(spool_dir(data_dir)) if n.endswith((READY, CLAIMED)))


def claim(data_dir: str, limit: int = 100, *, now: float | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Up to ``limit`` spooled answers, oldest first, each claimed by this caller: (claimed path, entry).

    A file another caller claimed first is skipped; an unreadable one is set aside as ``*.bad``.
    """
    directory = spool_dir(data_dir)
    clock = time.time() if now is None else now
    out: list[tuple[str, dict[str, Any]]] = []
    for name in sorted(_names(directory)):
        if len(out) >= limit:
            break
        path = os.path.join(directory, name)
        if name.endswith(CLAIMED):
            try:
                if clock - os.path.getmtime(path) < STALE_CLAIM_S:
                    continue
            except OSError:
                continue
            claimed = path
        elif name.endswith(READY) and not name.startswith("."):
            claimed = path[: -len(READY)] + CLAIMED
            try:
                os.rename(path, claimed)
            except OSError:  # another shipper took it
                continue
        else:
            continue
        try:
            os.utime(claimed)
            with open(claimed, encoding="utf-8") as fh:
                entry = json.load(fh)
            if not isinstance(entry, dict) or entry.get("v") != SPOOL_VERSION:
                raise ValueError("not a fallback record")
        except (OSError, ValueError):
            set_aside(claimed)
            continue
        out.append((claimed, entry))
    return out


def shipped(path: str) -> None:
    """The claimed answer is on the bus: forget it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def release(path: str) -> None:
    """The claimed answer could not be shipped: back in the spool for the next round."""
    with contextlib.suppress(OSError):
        os.rename(path, path[: -len(CLAIMED)] + READY)


def set_aside(path: str) -> None:
    """An answer that cannot be shipped (unreadable, or refused by the contract): kept as ``*.bad``."""
    base = path[: -len(CLAIMED)] if path.endswith(CLAIMED) else path
    with contextlib.suppress(OSError):
        os.rename(path, base + BAD)
