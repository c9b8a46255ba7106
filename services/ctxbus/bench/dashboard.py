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

The events it publishes are ``dashboard_events``, its stream client ``dashboard_stream``, its text
``dashboard_report``.
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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from ctxbus.adapters.broker_embedded import EmbeddedBroker, free_port
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import check_record_size
from ctxbus.adapters.lifeline import lifeline
from ctxbus.bench.dashboard_events import injected
from ctxbus.bench.dashboard_stream import StreamWatch, get_body, get_ms, read_stream, until
from ctxbus.bench.stats import peak_rss_mb, summary
from ctxbus.contract.serde import EventSerializer, event_headers
from ctxbus.contract.topics import Topics
from ctxbus.settings import KafkaSettings

TARGET_MS = 1_000.0
STARTUP_TIMEOUT_S = 30.0
#: how long to wait for the dashboard to count a burst
DRAIN_TIMEOUT_S = 120.0


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
    await until(watch, lambda: all(i in watch.first_seen for i in ids), 10.0)
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
            probes.append(await asyncio.to_thread(get_ms, f"http://127.0.0.1:{port}/api/snapshot"))
            await asyncio.sleep(0.05)

    prober = asyncio.create_task(probe())
    counted = await until(watch, lambda: watch.injections >= expected, DRAIN_TIMEOUT_S)
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
        health = json.loads(await asyncio.to_thread(get_body, f"http://127.0.0.1:{port}/healthz"))
        left = int(health["clients"]) - 1  # minus the bench's own stream
        if left == 0:
            break
        await asyncio.sleep(0.1)
    return {"opened": opened, "reset": clients, "left_open": left}


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
                snap = json.loads(get_body(f"http://127.0.0.1:{port}/api/snapshot"))
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
        await until(watch, lambda: watch.snapshots > 0, 10.0)
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
        final = json.loads(await asyncio.to_thread(get_body, f"http://127.0.0.1:{port}/api/snapshot"))
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
