"""``ctxbus bench dashboard``'s client: the Server-Sent Events stream read like a browser does, and plain GETs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

#: rows per snapshot the bench's stream asks for (the most the server gives)
ROWS = 100


@dataclass
class StreamWatch:
    """What a stream client saw: when each event id first appeared, totals, gaps, sizes."""

    first_seen: dict[str, float] = field(default_factory=dict)
    emitted_at: dict[str, float] = field(default_factory=dict)
    injections: int = 0
    snapshots: int = 0
    last_at: float = 0.0
    max_gap_s: float = 0.0
    max_bytes: int = 0
    max_build_ms: float = 0.0
    connected: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def watch(self, *, since: float) -> None:
        """Measure silences only from now on (the stream is quiet by design when nothing happens)."""
        self.last_at = since
        self.max_gap_s = 0.0


async def read_stream(port: int, watch: StreamWatch, stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64 * 1024 * 1024)
    writer.write(f"GET /api/events?rows={ROWS} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    try:
        while not stop.is_set():
            block = await reader.readuntil(b"\n\n")
            now = time.time()
            data = next((line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")), None)
            if data is None:
                continue
            snap = json.loads(data)
            watch.connected = bool(snap["feed"]["connected"])
            watch.snapshots += 1
            if watch.last_at:
                watch.max_gap_s = max(watch.max_gap_s, now - watch.last_at)
            watch.last_at = now
            watch.max_bytes = max(watch.max_bytes, len(data))
            watch.max_build_ms = max(watch.max_build_ms, float(snap["build_ms"]))
            watch.injections = int(snap["totals"]["injections"])
            for row in snap["recent"]:
                if row["id"] not in watch.first_seen:
                    watch.first_seen[row["id"]] = now
                    watch.emitted_at[row["id"]] = float(row["at"])
            watch.changed.set()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def until(watch: StreamWatch, predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        watch.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.changed.wait(), min(remaining, 0.5))
    return True


def get_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as resp:
        resp.read()
    return (time.perf_counter() - started) * 1000.0


def get_body(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: bytes = resp.read()
        return body
