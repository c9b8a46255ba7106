"""``ctxbus bench dashboard``: how fast the live dashboard shows an injection, and how it holds up under load.

Starts an embedded broker and ``ctxbus dashboard`` as its own process (as a user runs it), and from this
process publishes context-injected events and reads the dashboard's Server-Sent Events stream like a
browser does. Reports:

- latency: from an event's ``emitted_at`` until a snapshot that lists it arrives on the stream
  (p50/p95/p99/max over ``events`` events sent at ``rate`` per second; the target is under 1 s);
- load: ``bursts`` bursts of ``burst`` events sent as fast as the producer goes: how long until the
  stream's totals count them all, the longest silence on the stream meanwhile, the snapshot size and
  build time, and the JSON endpoint's answer time while the burst is read;
- memory: the dashboard's peak RSS before the load and after each burst (flat when it is bounded);
- disconnects: streams opened and dropped abruptly; the server must forget them and keep serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from ctxbus.adapters.broker_embedded import EmbeddedBroker, free_port
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import check_record_size
from ctxbus.adapters.lifeline import lifeline
from ctxbus.bench.stats import peak_rss_mb, summary
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, ContextSource, RetrievalRequested, Trigger
from ctxbus.contract.serde import EventSerializer, event_headers
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

TARGET_MS = 1_000.0
STARTUP_TIMEOUT_S = 30.0
#: how long to wait for the dashboard to count a burst
DRAIN_TIMEOUT_S = 120.0
#: rows per snapshot the bench's stream asks for (the most the server gives)
ROWS = 100
PROJECTS = ("acme/web", "acme/api", "payments", "infra", "docs")
EMPTY_REASONS = ("no_memories_in_project", "nothing_relevant_enough", "empty_prompt")


def injected(i: int, *, now: datetime | None = None) -> Envelope[ContextInjected]:
    """A realistic injection: one in ten empty (with a reason), sizes and latencies varied by ``i``."""
    emitted = now or datetime.now(UTC)
    request = Envelope.root(
        RetrievalRequested(agent_name="claude-code", prompt=f"task {i}", trigger=Trigger.USER_PROMPT),
        project=PROJECTS[i % len(PROJECTS)],
        session_id=f"bench-session-{i % 37}",
        producer="bench",
        now=emitted - timedelta(milliseconds=20 + i % 60),
    )
    empty = i % 10 == 0
    context = "" if empty else "### A remembered pattern\n" + "Keep the retry budget bounded. " * (1 + i % 120)
    payload = ContextInjected(
        context_source=ContextSource.NONE if empty else ContextSource.RAG_QUERY,
        pattern_count=0 if empty else 1 + i % 5,
        context_size_bytes=len(context.encode()),
        retrieval_duration_ms=8 + i % 30,
        agent_name="claude-code",
        trigger=(Trigger.USER_PROMPT, Trigger.SESSION_START, Trigger.GAP)[i % 3],
        context=context,
        context_chars=len(context),
        token_estimate=len(context) // 4,
        item_ids=() if empty else tuple(f"m{i}-{k}" for k in range(1 + i % 5)),
        empty_reason=EMPTY_REASONS[i % len(EMPTY_REASONS)] if empty else None,
        assembly_duration_ms=0.3 + (i % 7) / 10,
        request_emitted_at=request.emitted_at,
    )
    return request.caused(payload, producer="bench", now=emitted)


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


async def _until(watch: StreamWatch, predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        watch.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.changed.wait(), min(remaining, 0.5))
    return True


def _get_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as resp:
        resp.read()
    return (time.perf_counter() - started) * 1000.0


async def _latency_phase(
    producer: AIOKafkaProducer, topic: str, watch: StreamWatch, events: int, rate: float, limit: int
) -> dict[str, Any]:
    serialize = EventSerializer()
    ids = []
    started = time.perf_counter()
    for i in range(events):
        due = started + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        event = injected(i)
        ids.append(str(event.event_id))
        body = serialize(event)
        headers = event_headers(event, serialize.schema_id(event.event_type))
        key = str(event.entity_id).encode()
        check_record_size(topic, key, body, headers, limit)
        await producer.send_and_wait(topic, body, key=key, headers=headers)
    await _until(watch, lambda: all(i in watch.first_seen for i in ids), 10.0)
    latencies = [(watch.first_seen[i] - watch.emitted_at[i]) * 1000.0 for i in ids if i in watch.first_seen]
    figures = summary(latencies)
    return {
        "events": events,
        "rate_per_s": rate,
        "seen": len(latencies),
        "lost": events - len(latencies),
        "latency_ms": {k: round(v, 1) for k, v in figures.items()},
        "target_ms": TARGET_MS,
        "within_target": bool(latencies) and figures["p99"] < TARGET_MS,
    }


async def _burst(
    producer: AIOKafkaProducer, topic: str, watch: StreamWatch, port: int, first: int, count: int, limit: int
) -> dict[str, Any]:
    serialize = EventSerializer()
    prepared = []
    now = datetime.now(UTC)
    for i in range(first, first + count):
        event = injected(i, now=now)
        prepared.append(
            (
                serialize(event),
                str(event.entity_id).encode(),
                event_headers(event, serialize.schema_id("context.injected")),
            )
        )
    expected = watch.injections + count
    watch.watch(since=time.time())
    started = time.perf_counter()
    for body, key, headers in prepared:
        check_record_size(topic, key, body, headers, limit)
    futures = [await producer.send(topic, body, key=key, headers=headers) for body, key, headers in prepared]
    await producer.flush()
    await asyncio.gather(*futures)
    published_s = time.perf_counter() - started
    probes: list[float] = []

    async def probe() -> None:  # the JSON endpoint while the burst is read
        while watch.injections < expected:
            probes.append(await asyncio.to_thread(_get_ms, f"http://127.0.0.1:{port}/api/snapshot"))
            await asyncio.sleep(0.05)

    prober = asyncio.create_task(probe())
    counted = await _until(watch, lambda: watch.injections >= expected, DRAIN_TIMEOUT_S)
    drained_s = time.perf_counter() - started
    prober.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await prober
    return {
        "events": count,
        "counted": counted,
        "publish_s": round(published_s, 3),
        "shown_all_after_s": round(drained_s, 3),
        "events_per_s": round(count / drained_s, 1),
        "max_stream_silence_ms": round(watch.max_gap_s * 1000.0, 1),
        "snapshot_json_ms": {k: round(v, 1) for k, v in summary(probes).items()} if probes else None,
    }


async def _disconnects(port: int, clients: int) -> dict[str, Any]:
    """Open ``clients`` streams, read their first snapshot, reset them all; the server must forget them."""
    conns = []
    for _ in range(clients):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64 * 1024 * 1024)
        writer.write(f"GET /api/events?rows=5 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        conns.append((reader, writer))
    opened = 0
    for reader, _ in conns:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            await asyncio.wait_for(reader.readuntil(b"event: snapshot"), 5)
            opened += 1
    for _, writer in conns:
        writer.transport.abort()
    deadline = time.monotonic() + 10
    left = -1
    while time.monotonic() < deadline:
        health = json.loads(await asyncio.to_thread(_get_body, f"http://127.0.0.1:{port}/healthz"))
        left = int(health["clients"]) - 1  # minus the bench's own stream
        if left == 0:
            break
        await asyncio.sleep(0.1)
    return {"opened": opened, "reset": clients, "left_open": left}


def _get_body(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: bytes = resp.read()
        return body


@contextmanager
def _dashboard_process(bootstrap: str, prefix: str, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",  # what `ctxbus up` uses for the embedded broker
        CTXBUS_TOPIC_PREFIX=prefix,
        CTXBUS_DATA_DIR=str(log.parent),
        CTXBUS_LOG_LEVEL="WARNING",
    )
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxbus.cli.main", "dashboard", "--port", str(port), "--backlog", "0"],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
            preexec_fn=lifeline(signal.SIGTERM),  # noqa: PLW1509 (async-signal-safe): dies with the benchmark
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the dashboard did not start; see {log}")
            with contextlib.suppress(OSError):
                snap = json.loads(_get_body(f"http://127.0.0.1:{port}/api/snapshot"))
                if snap["feed"]["connected"] and snap["feed"]["partitions"] > 0:
                    break
            time.sleep(0.1)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _run(config: KafkaClientConfig, topics: Topics, port: int, pid: int, args: dict[str, Any]) -> dict[str, Any]:
    watch, stop = StreamWatch(), asyncio.Event()
    reader = asyncio.create_task(read_stream(port, watch, stop))
    producer = AIOKafkaProducer(**{**config.producer("bench-dashboard"), "linger_ms": 5})
    await producer.start()
    try:
        await _until(watch, lambda: watch.snapshots > 0, 10.0)
        limit = config.settings.max_record_bytes
        latency = await _latency_phase(producer, topics.context_injected, watch, args["events"], args["rate"], limit)
        before_load = peak_rss_mb(pid)
        bursts, after_burst = [], []
        first = args["events"]
        for _ in range(args["bursts"]):
            bursts.append(await _burst(producer, topics.context_injected, watch, port, first, args["burst"], limit))
            first += args["burst"]
            after_burst.append(peak_rss_mb(pid))
        disconnects = await _disconnects(port, args["clients"])
        final = json.loads(await asyncio.to_thread(_get_body, f"http://127.0.0.1:{port}/api/snapshot"))
    finally:
        await producer.stop()
        stop.set()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return {
        **latency,
        "load": {
            "bursts": bursts,
            "snapshot_bytes_max": watch.max_bytes,
            "snapshot_build_ms_max": watch.max_build_ms,
            "snapshots_received": watch.snapshots,
        },
        "peak_rss_mb": {"before_load": before_load, "after_burst": after_burst},
        "disconnects": disconnects,
        "dashboard_total": final["totals"]["injections"],
        "dashboard_skipped": final["skipped"]["total"],
        "published_total": args["events"] + args["bursts"] * args["burst"],
    }


def run(
    events: int = 300, rate: float = 50.0, burst: int = 5_000, bursts: int = 2, clients: int = 50
) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="ctxbus-bench-dashboard-"))
    prefix = f"benchdash{uuid.uuid4().hex[:6]}"
    topics = Topics(prefix)
    args = {"events": events, "rate": rate, "burst": burst, "bursts": bursts, "clients": clients}
    with EmbeddedBroker(log_file=data_dir / "broker.log") as broker:
        settings = KafkaSettings(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
        config = KafkaClientConfig(settings, broker.bootstrap_servers, embedded=True)
        asyncio.run(ensure_topics(config, topics.all(), partitions=3, replication=1))
        port = free_port()
        with _dashboard_process(broker.bootstrap_servers, prefix, port, data_dir / "dashboard.log") as proc:
            result = asyncio.run(_run(config, topics, port, proc.pid, args))
    return {"data_dir": str(data_dir), **result}


def print_report(result: dict[str, Any]) -> None:
    lat = result["latency_ms"]
    bursts = result["load"]["bursts"]
    print(
        f"ctxbus bench dashboard: {result['events']} injections at {result['rate_per_s']:g}/s, then "
        f"{len(bursts)} bursts of {bursts[0]['events'] if bursts else 0}"
    )
    print(
        f"  emitted_at -> seen on the event stream: p50 {lat['p50']:.1f}  p95 {lat['p95']:.1f}  p99 {lat['p99']:.1f}  "
        f"max {lat['max']:.1f} ms (target p99 < {result['target_ms']:.0f} ms: "
        f"{'met' if result['within_target'] else 'NOT met'}); seen {result['seen']}, lost {result['lost']}"
    )
    for i, b in enumerate(result["load"]["bursts"], 1):
        probe = b["snapshot_json_ms"]
        probe_text = f"; /api/snapshot p50 {probe['p50']:.1f} max {probe['max']:.1f} ms" if probe else ""
        print(
            f"  burst {i}: {b['events']} events published in {b['publish_s']:.2f} s, all shown after "
            f"{b['shown_all_after_s']:.2f} s ({b['events_per_s']:.0f}/s), longest stream silence "
            f"{b['max_stream_silence_ms']:.0f} ms{probe_text}"
        )
    load = result["load"]
    print(
        f"  snapshots: {load['snapshots_received']} received, at most {load['snapshot_bytes_max'] / 1024:.1f} KiB, "
        f"built in at most {load['snapshot_build_ms_max']:.1f} ms"
    )
    rss = result["peak_rss_mb"]
    after = ", ".join(f"{m:.0f}" for m in rss["after_burst"] if m is not None)
    print(f"  dashboard peak RSS: {rss['before_load'] or 0:.0f} MiB before the bursts, after each: {after} MiB")
    d = result["disconnects"]
    print(f"  disconnects: {d['opened']} streams opened and reset, {d['left_open']} left open afterwards")
    print(
        f"  counted {result['dashboard_total']} of {result['published_total']} published, "
        f"skipped {result['dashboard_skipped']}"
    )
