"""``ctxbus bench broker``: what one record's trip through the embedded broker costs as a partition fills.

The embedded broker (Tansu 0.6, memory storage) keeps each produced batch as an object and, on every fetch that
returns records, goes through every batch the fetched partition holds. A request path that sends one record at a
time makes one batch per record, so the cost of each hop grows with the requests answered since the broker started.

The benchmark starts its own broker and, round after round, appends ``fill`` records to a partition, then times
``probes`` round trips on partition 0 (produce one record, a consumer at the end of the partition fetches it, as a
service does): the broker's CPU and the wall time per round trip. Series:

- ``same partition, one record per batch``: the request path's pattern, filling the probed partition;
- ``same partition, batched``: the same records sent together (the archive's refill after a restart does this);
- ``other partition, one record per batch``: the batches go to partition 1 of the same topic.

:func:`slope` (pure) fits the growth: broker ms per round trip per 1,000 records sent.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.admin import ensure_topics
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.bench.cpu import CpuMeter
from ctxbus.settings import KafkaSettings

TOPIC = "bench.broker.growth"
PAYLOAD = b"x" * 1_000  # about one completed event


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    fill_partition: int
    batched: bool


SERIES = (
    Series("same partition, one record per batch", 0, batched=False),
    Series("same partition, batched", 0, batched=True),
    Series("other partition, one record per batch", 1, batched=False),
)


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(records sent, ms)`` points, in ms per 1,000 records (``statistics.linear_regression``;
    its ``StatisticsError``, a ``ValueError``, for fewer than two points or a single x)."""
    return 1000.0 * statistics.linear_regression([x for x, _ in points], [y for _, y in points]).slope


async def _series(
    config: KafkaClientConfig, pid: int, series: Series, rounds: int, fill: int, probes: int
) -> dict[str, Any]:
    producer = AIOKafkaProducer(**config.producer("bench-broker"))
    consumer = AIOKafkaConsumer(**config.consumer("bench-broker", None))
    await producer.start()
    await consumer.start()
    probe = TopicPartition(TOPIC, 0)
    rows = []
    try:
        consumer.assign([probe])
        held = 0
        for _ in range(rounds):
            if series.batched:
                sent = [await producer.send(TOPIC, PAYLOAD, partition=series.fill_partition) for _ in range(fill)]
                await asyncio.gather(*sent)
            else:
                for _ in range(fill):
                    await producer.send_and_wait(TOPIC, PAYLOAD, partition=series.fill_partition)
            held += fill
            await consumer.seek_to_end(probe)
            meter = CpuMeter({"broker": pid})
            meter.start()
            started = time.perf_counter()
            for _ in range(probes):
                await producer.send_and_wait(TOPIC, PAYLOAD, partition=0)
                await consumer.getone(probe)
            wall_s = time.perf_counter() - started
            meter.stop()
            rows.append(
                {
                    "records_sent": held,
                    "broker_cpu_ms_per_round_trip": round(meter.used_s["broker"] * 1000.0 / probes, 3),
                    "wall_ms_per_round_trip": round(wall_s * 1000.0 / probes, 3),
                }
            )
    finally:
        await consumer.stop()
        await producer.stop()
    points = [(r["records_sent"], r["broker_cpu_ms_per_round_trip"]) for r in rows]
    return {
        "series": series.name,
        "rounds": rows,
        "broker_ms_per_1000_records": round(slope(points), 3),  # run() asks for two rounds at least
    }


def run(*, rounds: int = 8, fill: int = 1_000, probes: int = 100) -> dict[str, Any]:
    """Every series of :data:`SERIES` on a fresh embedded broker of its own (see the module doc)."""
    if rounds < 2 or fill < 1 or probes < 1:
        raise ValueError("rounds must be at least 2, fill and probes at least 1")
    results = []
    for series in SERIES:
        with EmbeddedBroker() as broker:
            pid = broker.pid
            if pid is None:
                raise RuntimeError("the embedded broker has no process")
            config = KafkaClientConfig(KafkaSettings(), broker.bootstrap_servers, embedded=True)

            async def go(series: Series = series, pid: int = pid, config: KafkaClientConfig = config) -> dict[str, Any]:
                await ensure_topics(config, [TOPIC], partitions=2, replication=1)
                return await _series(config, pid, series, rounds, fill, probes)

            results.append(asyncio.run(go()))
    return {"rounds": rounds, "fill": fill, "probes": probes, "series": results}


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus bench broker: the embedded broker, {result['rounds']} rounds of {result['fill']} records of "
        f"{len(PAYLOAD)} bytes, {result['probes']} produce -> fetch round trips on partition 0 after each"
    )
    for s in result["series"]:
        print(f"  {s['series']}: broker {s['broker_ms_per_1000_records']:+.2f} ms per round trip per 1,000 records")
        for r in s["rounds"]:
            print(
                f"    {r['records_sent']:7d} records sent: broker CPU {r['broker_cpu_ms_per_round_trip']:6.2f} ms, "
                f"wall {r['wall_ms_per_round_trip']:6.2f} ms per round trip"
            )
