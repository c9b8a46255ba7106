"""``ctxbus bench replay``: how fast ``ctxbus replay`` reads, decodes and aggregates the embedded broker.

Starts its own embedded broker, publishes N realistic events quickly (whole chains: requested,
completed with ten ranked items and their score breakdowns, injected with the rendered context, an
outcome per session, a few dead letters and foreign records), pre-serialised with the current
schemas and sent by a raw batching producer, then times the replay over all topics: planning,
fetching, decoding, joining and building the report. It checks the report against what was
published (chains, outcomes, dead letters, skipped records) and prints events per second, in
process and with decoding worker processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.limits import check_record_size
from ctxbus.bench.replay_events import SEND_WINDOW, Expected, Record, synthetic_events
from ctxbus.contract.topics import Topics
from ctxbus.replay.engine import default_workers, replay
from ctxbus.replay.options import Selection
from ctxbus.replay.report_model import Report
from ctxbus.settings import KafkaSettings


async def publish(config: KafkaClientConfig, records: list[Record]) -> float:
    """Send the records with a batching producer; returns the seconds it took (all acknowledged)."""
    producer = AIOKafkaProducer(**{**config.producer("bench-replay"), "linger_ms": 10, "max_batch_size": 1_048_576})
    await producer.start()
    started = time.perf_counter()
    try:
        pending = []
        for rec in records:
            check_record_size(rec.topic, rec.key, rec.value, rec.headers, config.settings.max_record_bytes)
            pending.append(
                await producer.send(
                    rec.topic, rec.value, key=rec.key, headers=rec.headers, timestamp_ms=rec.timestamp_ms
                )
            )
            if len(pending) >= SEND_WINDOW:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return time.perf_counter() - started


def check(report: Report, expected: Expected) -> list[str]:
    """Where the report disagrees with what was published (empty: it agrees)."""
    pairs = {
        "records": (report.records, expected.events),
        "chains": (report.chains["total"], expected.chains),
        "injections": (report.chains["injected"] + report.chains["empty"], expected.injected),
        "empty injections": (report.chains["empty"], expected.empty),
        "dead letters": (report.dead_letters, expected.dead_letters),
        "dead-lettered chains": (report.chains["dead_lettered"], expected.dead_letters),
        "skipped records": (sum(c.count for c in report.skipped), expected.foreign),
        # every session ends with an outcome published after its requests
        "chains with an outcome": (report.chains["with_outcome"], expected.chains),
    }
    return [f"{name}: report {got}, published {want}" for name, (got, want) in pairs.items() if got != want]


async def _run(events: int, worker_counts: list[int | None], log: Callable[[str], None]) -> dict[str, Any]:
    with EmbeddedBroker() as broker:
        settings = KafkaSettings(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
        config = KafkaClientConfig(settings, broker.bootstrap_servers, embedded=True)
        topics = Topics("benchreplay")
        await ensure_topics(config, topics.all(), partitions=3, replication=1)
        t0 = time.perf_counter()
        records, expected = synthetic_events(topics, events)
        build_s = time.perf_counter() - t0
        log(f"built {len(records)} events in {build_s:.2f} s; publishing")
        publish_s = await publish(config, records)
        runs = []
        for workers in worker_counts:
            t0 = time.perf_counter()
            run = await replay(config, topics, topics.event_topics(), Selection(), workers=workers)
            t1 = time.perf_counter()
            report = run.report()
            total_s = time.perf_counter() - t0
            problems = check(report, expected)
            runs.append(
                {
                    "workers": run.source.workers,
                    "records": report.records,
                    "seconds": round(total_s, 3),
                    "events_per_s": round(report.records / total_s, 1),
                    "phases_s": {
                        **{k: round(v, 3) for k, v in run.timings.items()},
                        "report": round(time.perf_counter() - t1, 3),
                    },
                    "problems": problems,
                }
            )
            log(f"replay with {run.source.workers} decoding workers: {report.records / total_s:,.0f} events/s")
    return {
        "events": len(records),
        "chains": expected.chains,
        "sessions": expected.sessions,
        "build_s": round(build_s, 3),
        "publish_s": round(publish_s, 3),
        "publish_events_per_s": round(len(records) / publish_s, 1),
        "runs": runs,
    }


def run(events: int, workers: list[int | None] | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Publish ``events`` and replay them once per entry of ``workers`` (None: the replay's default)."""
    counts: list[int | None] = workers if workers else [0, None]
    if None in counts and default_workers(events) == 0:
        counts = [c for c in counts if c is not None] or [0]
    return asyncio.run(_run(events, counts, log))


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus bench replay: {result['events']:,} events ({result['chains']:,} chains, {result['sessions']:,} "
        f"sessions) built in {result['build_s']} s, published in {result['publish_s']} s "
        f"({result['publish_events_per_s']:,.0f}/s)"
    )
    for r in result["runs"]:
        phases = ", ".join(f"{k} {v} s" for k, v in r["phases_s"].items())
        status = "report matches what was published" if not r["problems"] else "; ".join(r["problems"])
        print(
            f"  replay, {r['workers']} decoding worker(s): {r['records']:,} records in {r['seconds']} s = "
            f"{r['events_per_s']:,.0f} events/s ({phases}); {status}"
        )
