"""The parts of ``ctxbus bench overload`` that talk to a running stack: hook calls through the gateway as
the lean hook client makes them, a watcher of the request and injection topics, and /metrics samples."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.bench.bus_tail import tail
from ctxbus.contract.payloads import ContextInjected
from ctxbus.contract.serde import HEADER_CORRELATION_ID, EventDecodeError, EventDeserializer, header_value
from ctxbus.contract.topics import Topics

#: what a hook call's answer held
CONTEXT, FALLBACK, EMPTY, ERROR = "context", "fallback", "empty", "error"


@dataclass(frozen=True, slots=True)
class HookCall:
    sent_at: float  # time.monotonic()
    latency_s: float
    kind: str
    error: str = ""


async def hook_call(port: int, secret: str, body: bytes, budget_ms: int, marker: str, give_up_s: float) -> HookCall:
    """One ``POST /v1/hooks`` as ``ctxbus hook user-prompt-submit`` sends it (the installation's secret, its
    remaining budget in ``X-Ctxbus-Timeout-Ms``); what the answer held (the pattern-file fallback is
    recognised by ``marker``)."""
    sent = time.monotonic()
    head = (
        f"POST /v1/hooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {secret}\r\n"
        f"Content-Length: {len(body)}\r\nX-Ctxbus-Timeout-Ms: {budget_ms}\r\n"
        "X-Ctxbus-Hook-Event: UserPromptSubmit\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    try:
        async with asyncio.timeout(give_up_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(head + body)
                await writer.drain()
                raw = await reader.read()
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        return HookCall(sent, time.monotonic() - sent, ERROR, repr(exc))
    latency = time.monotonic() - sent
    status, _, payload = raw.partition(b"\r\n\r\n")
    if b" 200 " not in status.split(b"\r\n", 1)[0] + b" ":
        return HookCall(sent, latency, ERROR, status[:80].decode("latin-1"))
    try:
        context = json.loads(payload)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError) as exc:
        return HookCall(sent, latency, ERROR, f"invalid hook output: {exc!r}")
    kind = FALLBACK if marker in context else CONTEXT if context else EMPTY
    return HookCall(sent, latency, kind)


@dataclass
class BusWatch:
    """Requests and injections as they pass on the bus (their correlation ids, when they were read)."""

    requested: dict[str, float] = field(default_factory=dict)
    injected: dict[str, tuple[float, str | None]] = field(default_factory=dict)  # received, empty_reason

    def unanswered(self) -> int:
        return sum(1 for cid in self.requested if cid not in self.injected)


async def watch_bus(
    config: KafkaClientConfig, topics: Topics, seen: BusWatch, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    """Read the request and injection topics from their ends (no group) until ``stop``."""
    deserialize = EventDeserializer()
    async with tail(config, "bench-overload-watch", (topics.retrieval_requested, topics.context_injected)) as consumer:
        ready.set()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=50)
            now = time.monotonic()
            for tp, records in batch.items():
                for rec in records:
                    cid = header_value(list(rec.headers or ()), HEADER_CORRELATION_ID) or ""
                    if tp.topic == topics.retrieval_requested:
                        seen.requested.setdefault(cid, now)
                        continue
                    try:
                        event = deserialize(rec.value)
                    except EventDecodeError:
                        continue
                    if isinstance(event.payload, ContextInjected):
                        seen.injected.setdefault(cid, (now, event.payload.empty_reason))


def scrape(*metrics_ports: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The stack's /metrics: metric sample name -> sorted labels -> value, summed over the ports given (``up``'s
    alone has its child processes' series too)."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for port in metrics_ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples = out.setdefault(sample.name, {})
                key = tuple(sorted(sample.labels.items()))
                samples[key] = samples.get(key, 0.0) + sample.value
    return out


def by_label(
    scraped: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, label: str, **where: str
) -> dict[str, float]:
    """Values of one sample name summed by one label, among the samples matching ``where``."""
    totals: dict[str, float] = {}
    for labels, value in scraped.get(name, {}).items():
        d = dict(labels)
        if all(d.get(k) == v for k, v in where.items()):
            totals[d.get(label, "")] = totals.get(d.get(label, ""), 0.0) + value
    return totals


def lag_of(scraped: dict[str, dict[tuple[tuple[str, str], ...], float]], service: str) -> float:
    """A consumer loop's lag over its partitions."""
    return sum(by_label(scraped, "ctxbus_consumer_lag", "partition", service=service).values())
