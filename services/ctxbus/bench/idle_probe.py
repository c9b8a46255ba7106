"""What ``ctxbus bench idle`` measures beside each first request after a silence (``ctxbus.bench.idle``).

- **Controls**: the machine's own after-silence penalty, measured in the benchmark's process just before the request,
  after the same silence and with no bus: one embed of a fixed prompt (the retriever's kind of work, on its own
  embedder), one loopback round trip to a thread of this process (two wakes of sleeping threads), and one read of
  each page of 16 MB of this process's memory (what the host does to memory nobody touched: on these VMs a page
  untouched for a second or more can take tens of microseconds to read again, with no fault the guest sees). Their
  warm values are measured beside the warm requests, so a ratio shows how much slower the machine itself is after
  idle.
- **Hops**: where a request's time went, from the Kafka record timestamps of its chain (requested, completed,
  injected), read once at the end of the run (the benchmark has no consumer that would poll the broker meanwhile).
- **Major page faults** of the stack's processes during the request: pages the kernel dropped while the stack was
  idle (a memory reclaimer such as DAMON's pageout drops file pages nobody touched for a while).
- **Stages**: each stage's time in the request (``ctxbus_stage_seconds``: the gateway's admit, feedback, publish and
  reply, the retriever's embed, search and rank, the injector's assembly; ``ctxbus_processing_seconds``: a service's
  whole handling of the event, its output acknowledged), from the stack's ``/metrics`` read after the request and
  after the one before it (nothing else observes a stage meanwhile: the benchmark's requests are one at a time).

The arithmetic on those figures (:func:`hops`, :func:`pause_row`, :func:`case_of`) is pure.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.contract.serde import EventDecodeError, EventDeserializer
from ctxbus.ports import Embedder

#: the fixed prompt the embed control embeds every time (a remembered query vector would not be embedded again, so
#: the embedder used here has no cache)
CONTROL_PROMPT = "why does the integration test for the payment webhook fail after the database migration"
#: the memory control's size, and the stride of its read (one byte a page)
MEMORY_CONTROL_BYTES = 16 * 1024 * 1024
PAGE_BYTES = 4096
_CASE = re.compile(r"\(case (\d+)\)\s*$")


def case_of(prompt: str) -> int | None:
    """The benchmark's number of a prompt (each ends in ``(case N)``), or None."""
    found = _CASE.search(prompt)
    return int(found.group(1)) if found else None


class Controls:
    """The controls of this process: an embedder of its own (None: no embed control) and a loopback echo thread."""

    def __init__(self, embedder: Embedder | None) -> None:
        self._embedder = embedder
        self._pages = memoryview(bytearray(b"\x01" * MEMORY_CONTROL_BYTES))  # every page written: resident
        self._near, far = socket.socketpair()
        self._echo = threading.Thread(target=_echo, args=(far,), name="idle-control-echo", daemon=True)
        self._echo.start()

    def measure(self) -> dict[str, float]:
        """One loopback round trip, one read of every page of the memory control, and one embed, in milliseconds."""
        out: dict[str, float] = {}
        started = time.perf_counter()
        self._near.sendall(b"x")
        self._near.recv(1)
        out["loopback_ms"] = round((time.perf_counter() - started) * 1000, 3)
        started = time.perf_counter()
        bytes(self._pages[::PAGE_BYTES])  # one byte of each page, copied in C
        out["memory_ms"] = round((time.perf_counter() - started) * 1000, 3)
        if self._embedder is not None:
            started = time.perf_counter()
            self._embedder.embed_query(CONTROL_PROMPT)
            out["embed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return out

    def close(self) -> None:
        self._near.close()  # the echo thread sees the end and stops
        self._echo.join(2.0)


def _echo(sock: socket.socket) -> None:
    with sock:
        while data := sock.recv(1):
            sock.sendall(data)


def major_faults(pids: Mapping[str, int]) -> dict[str, int]:
    """Each process's major page faults so far (field 12 of ``/proc/PID/stat``); 0 when unreadable."""
    out: dict[str, int] = {}
    for name, pid in pids.items():
        try:
            line = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            out[name] = 0
            continue
        out[name] = int(line[line.rindex(")") + 2 :].split()[9])
    return out


#: per-request timings read from ``/metrics``: (sample name, the label that names the part)
STAGE_SAMPLES = (("ctxbus_stage_seconds_sum", "stage"), ("ctxbus_processing_seconds_sum", None))
Scraped = Mapping[str, Mapping[tuple[tuple[str, str], ...], float]]


def stage_delta(before: Scraped, after: Scraped) -> dict[str, float]:
    """Milliseconds each stage (``service.stage``) and each service's processing (``service.processing``) took
    between two reads of the stack's ``/metrics`` (one request's worth when it alone ran between them); stages
    that did not move are left out."""
    out: dict[str, float] = {}
    for name, part in STAGE_SAMPLES:
        for labels, value in after.get(name, {}).items():
            moved = value - before.get(name, {}).get(labels, 0.0)
            if moved <= 0:
                continue
            named = dict(labels)
            key = f"{named.get('service', '?')}.{named.get(part, '?') if part else 'processing'}"
            out[key] = round(out.get(key, 0.0) + moved * 1000, 2)
    return out


def fault_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {name: after.get(name, count) - count for name, count in before.items()}


@dataclass
class Call:
    """One request through the gateway: its prompt's case number and when it left and came back (epoch seconds)."""

    case: int
    sent_at: float
    received_at: float


@dataclass
class ChainTimes:
    """Record timestamps (epoch seconds) of each case's events: requested, completed, injected."""

    requested: dict[int, float] = field(default_factory=dict)
    completed: dict[int, float] = field(default_factory=dict)
    injected: dict[int, float] = field(default_factory=dict)
    #: the retriever's own work on each case (its completed event's ``retrieval_duration_ms``)
    retrieval_ms: dict[int, float] = field(default_factory=dict)


def hops(call: Call, chain: ChainTimes) -> dict[str, float] | None:
    """Milliseconds of each hop of one call: ``gateway_in`` (the hook's POST -> its request on the bus), ``retriever``
    (requested -> completed), ``injector`` (completed -> injected), ``gateway_out`` (injected -> the answer back),
    and ``retrieval_work`` (the retriever's own account of its work, within its hop) when known; None when a record
    of its chain was not found. Record timestamps have millisecond resolution."""
    times = [chain.requested.get(call.case), chain.completed.get(call.case), chain.injected.get(call.case)]
    if any(t is None for t in times):
        return None
    requested, completed, injected = (float(t or 0.0) for t in times)
    points = [call.sent_at, requested, completed, injected, call.received_at]
    names = ("gateway_in", "retriever", "injector", "gateway_out")
    out = {name: round((b - a) * 1000, 1) for name, a, b in zip(names, points, points[1:], strict=False)}
    work = chain.retrieval_ms.get(call.case)
    if work is not None:  # the retriever's hop split: its own work, and the rest (the wake, the fetch, the publish)
        out["retrieval_work"] = round(work, 1)
    return out


def pause_row(
    pause_s: float,
    end_to_end_ms: float,
    warm_p50: float,
    control: Mapping[str, float],
    control_warm: Mapping[str, float],
) -> dict[str, Any]:
    """One pause's figures: the end-to-end time and its ratio to the warm p50, each control and its ratio to its own
    warm p50 (the machine's share of the penalty), and ``net_vs_warm_p50``: the end-to-end time less what the embed
    control lost after the silence (the retriever embeds once per request), against the warm p50."""
    row: dict[str, Any] = {
        "pause_s": pause_s,
        "end_to_end_ms": round(end_to_end_ms, 2),
        "vs_warm_p50": round(end_to_end_ms / warm_p50, 2) if warm_p50 > 0 else None,
        "control": dict(control),
        "control_vs_warm": {
            name: round(ms / control_warm[name], 2) for name, ms in control.items() if control_warm.get(name, 0.0) > 0
        },
    }
    extra = max(0.0, control.get("embed_ms", 0.0) - control_warm.get("embed_ms", 0.0))
    row["net_vs_warm_p50"] = round((end_to_end_ms - extra) / warm_p50, 2) if warm_p50 > 0 else None
    return row


async def read_chains(
    config: KafkaClientConfig, topics: Iterable[tuple[str, str]], *, quiet_ms: int = 500
) -> ChainTimes:
    """Every benchmark case's record timestamps on the three topics (``topics``: pairs of a ``ChainTimes`` field and
    a topic name), read from the beginning once, after the measurement, by a consumer with no group."""
    chain = ChainTimes()
    deserialize = EventDeserializer()
    by_topic = dict((name, kind) for kind, name in topics)
    cases: dict[str, int] = {}  # correlation id -> case, from the requests
    consumer = AIOKafkaConsumer(**config.consumer("bench-idle-chains", None))
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(t, p) for t in by_topic for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        while batch := await consumer.getmany(timeout_ms=quiet_ms):
            for part in batch.values():
                records.extend(part)
    finally:
        await consumer.stop()
    decoded = []
    for rec in records:
        try:
            decoded.append((by_topic[rec.topic], rec.timestamp / 1000.0, deserialize(rec.value)))
        except EventDecodeError:
            continue
    for kind, ts, event in decoded:  # the requests first: they name the cases
        case = case_of(getattr(event.payload, "prompt", "")) if kind == "requested" else None
        if case is not None:
            cases[str(event.correlation_id)] = case
            chain.requested.setdefault(case, ts)
    for kind, ts, event in decoded:
        case = cases.get(str(event.correlation_id))
        if case is not None and kind in ("completed", "injected"):
            getattr(chain, kind).setdefault(case, ts)
            work = getattr(event.payload, "retrieval_duration_ms", None)
            if kind == "completed" and isinstance(work, int | float):
                chain.retrieval_ms.setdefault(case, float(work))
    return chain


def chains_of(config: KafkaClientConfig, requested: str, completed: str, injected: str) -> ChainTimes:
    """:func:`read_chains` from synchronous code (asyncio.TimeoutError and Kafka errors: an empty result)."""
    pairs = (("requested", requested), ("completed", completed), ("injected", injected))
    try:
        return asyncio.run(asyncio.wait_for(read_chains(config, pairs), 60.0))
    except Exception:  # the hops are a diagnosis: the benchmark's figures stand without them
        return ChainTimes()
