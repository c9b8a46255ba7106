"""``ctxbus bench broker-kill``: ``ctxbus up`` healing its embedded broker under load (issue 27).

A stack (``ctxbus up``, the embedded broker, the archive on, logging at INFO as a user's does) answers requests
published at ``rate`` per second. After ``before_s`` seconds the broker process is SIGKILLed at an arbitrary
moment of the load, ``kills`` times, each once the stack has recovered from the last and ran ``between_s`` more
seconds. While the broker is down (from the kill until the runtime file names a new live broker and ``/readyz``
answers 200) no request is sent; a send in flight at the kill that fails is counted as not sent.

Per kill: seconds until the stack is ready again, seconds until the first request published then is answered
(the figure the issue asks under 15 s), and the bytes ``up``'s log grew by from the kill until it was ready (the
lines of the outage alone) and until ``between_s`` after (with the load's own lines). At the end, from the whole
history (the replay of the request topic, the injected topic read from its beginning): requests acknowledged by
the broker and lost (none should be: the load's publisher keeps what it sent until the archive holds it and sends
again what a killed broker took with it, ``adapters/kafka/resend.py``; it counts those: "sent again"), requests
not answered, and answers repeated (the groups' positions come back from
the archive's last snapshot, taken up to its interval before the kill).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.resend import keeper_for
from ctxbus.bench.recycle import _ready, _request
from ctxbus.bench.stack import BenchStack, bench_stack
from ctxbus.contract.topics import Topics

RECOVER_TIMEOUT_S = 120.0
SEND_TIMEOUT_S = 10.0
POLL_S = 0.05


def _runtime(stack: BenchStack) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((stack.settings.data_dir / "runtime.json").read_text())
    return data


def _log_size(stack: BenchStack) -> int:
    return (stack.settings.data_dir / "stack.log").stat().st_size


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (ProcessLookupError, OSError, IndexError):
        return False


def _wait_recovered(stack: BenchStack, old_pid: int) -> None:
    deadline = time.monotonic() + RECOVER_TIMEOUT_S
    while time.monotonic() < deadline:
        if stack.proc.poll() is not None:
            raise RuntimeError(f"ctxbus up exited with code {stack.proc.returncode} after the broker was killed")
        with contextlib.suppress(OSError, ValueError, KeyError):
            info = _runtime(stack)
            pid = info["broker_pid"]
            if isinstance(pid, int) and pid != old_pid and _alive(pid) and _ready(int(info["metrics_port"])):
                return
        time.sleep(POLL_S)
    raise RuntimeError(f"the stack did not recover within {RECOVER_TIMEOUT_S:g} s")


class _Load:
    """Requests at a steady rate, none while ``down`` is set; what was acknowledged, in which phase."""

    def __init__(self, kafka: KafkaClientConfig, topics: Topics, rate: float) -> None:
        self._kafka, self._topics, self._every = kafka, topics, 1.0 / rate
        self.down = asyncio.Event()
        self.stop = asyncio.Event()
        self.phase = "before"
        self.acked: dict[str, str] = {}  # correlation id -> phase
        self.unsent = 0
        self.skipped = 0

    async def run(self) -> None:
        async with EventPublisher(self._kafka, "bench-broker-kill") as publisher:
            i = 0
            while not self.stop.is_set():
                if self.down.is_set():
                    self.skipped += 1
                else:
                    event = _request(f"How do we keep the broker alive? ({i})")
                    phase = self.phase
                    try:
                        await asyncio.wait_for(
                            publisher.publish(self._topics.retrieval_requested, event), SEND_TIMEOUT_S
                        )
                    except (KafkaError, TimeoutError):
                        self.unsent += 1
                    else:
                        self.acked[str(event.correlation_id)] = phase
                i += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), self._every)


async def _first_answer_s(stack: BenchStack, topics: Topics, killed_at: float) -> float:
    """Seconds from the kill until a request published now is answered."""
    from ctxbus.bench.recycle import probe  # noqa: PLC0415

    await probe(stack.kafka, topics, 1)
    return time.monotonic() - killed_at


async def _ids(kafka: KafkaClientConfig, topic: str) -> list[str]:
    """Every correlation id on ``topic``, from its beginning to its end now."""
    consumer = AIOKafkaConsumer(**kafka.consumer("bench-broker-kill-reader", None))
    await consumer.start()
    ids: list[str] = []
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        quiet = 0
        while quiet < 10:  # the end Tansu reports can be short (NOTES.md): read until nothing comes for 1 s
            batch = await consumer.getmany(timeout_ms=100, max_records=5_000)
            records = [r for rs in batch.values() for r in rs]
            quiet = 0 if records else quiet + 1
            ids += [dict(r.headers).get("ctxbus-correlation-id", b"").decode() for r in records]
    finally:
        await consumer.stop()
    return ids


def _replayed(stack: BenchStack) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", "replay", "--topic", "requested", "--format", "csv"],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ctxbus replay failed: {done.stderr.strip()[-500:]}")
    return {row.split(",", 1)[0] for row in done.stdout.strip().splitlines()[1:]}


async def _run(stack: BenchStack, kills: int, rate: float, before_s: float, between_s: float) -> dict[str, Any]:
    topics = Topics(stack.settings.topic_prefix)
    load = _Load(stack.kafka, topics, rate)
    loader = asyncio.create_task(load.run())
    per_kill: list[dict[str, Any]] = []
    await asyncio.sleep(before_s)
    for n in range(kills):
        old = int(_runtime(stack)["broker_pid"])
        log_from = _log_size(stack)
        load.down.set()
        load.phase = "down"
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        await asyncio.to_thread(_wait_recovered, stack, old)
        ready_s = time.monotonic() - killed_at
        log_down = _log_size(stack) - log_from
        answer_s = await _first_answer_s(stack, topics, killed_at)
        load.phase = f"after-{n + 1}"
        load.down.clear()
        await asyncio.sleep(between_s)
        per_kill.append(
            {
                "ready_s": round(ready_s, 2),
                "first_answer_s": round(answer_s, 2),
                "log_bytes_down": log_down,
                "log_bytes": _log_size(stack) - log_from,
            }
        )
    load.stop.set()
    await loader
    replayed = await asyncio.to_thread(_replayed, stack)
    answers = await _ids(stack.kafka, topics.context_injected)
    answered = set(answers)
    lost = {cid: phase for cid, phase in load.acked.items() if cid not in replayed}
    return {
        "kills": per_kill,
        "acked": len(load.acked),
        "acked_by_phase": {p: sum(1 for v in load.acked.values() if v == p) for p in sorted(set(load.acked.values()))},
        "skipped_while_down": load.skipped,
        "unsent": load.unsent,
        "lost": lost,
        "lost_by_phase": {p: sum(1 for v in lost.values() if v == p) for p in sorted(set(lost.values()))},
        "unanswered": sum(1 for cid in load.acked if cid not in answered),
        "repeated_answers": len(answers) - len(answered),
        # sent again by the load's publisher: acknowledged by a broker that died before the archive held them
        "resent": keeper_for(stack.kafka.archive).resent if stack.kafka.archive is not None else 0,
    }


def run(*, kills: int, rate: float, before_s: float, between_s: float, memories: int) -> dict[str, Any]:
    env = {"CTXBUS_LOG_LEVEL": "INFO", "CTXBUS_KAFKA_EMBEDDED_RESTART_LIMIT": str(max(kills, 1))}
    with bench_stack(memories, **env) as stack:
        result = asyncio.run(_run(stack, kills, rate, before_s, between_s))
        return {"rate": rate, "memories": memories, "before_s": before_s, "between_s": between_s, **result}


def print_report(result: dict[str, Any]) -> None:
    print(
        f"ctxbus bench broker-kill: {len(result['kills'])} SIGKILL(s) of the embedded broker under "
        f"{result['rate']:g} requests/s ({result['memories']} memories)"
    )
    for i, kill in enumerate(result["kills"], 1):
        print(
            f"  kill {i}: ready again after {kill['ready_s']:.2f} s, first answer {kill['first_answer_s']:.2f} s "
            f"after the kill; up's log grew {kill['log_bytes_down'] / 1000:.1f} KB until it was ready, "
            f"{kill['log_bytes'] / 1000:.1f} KB with the load's lines until {result['between_s']:g} s later"
        )
    print(
        f"  {result['acked']} requests acknowledged {result['acked_by_phase']}, {result['skipped_while_down']} not "
        f"sent while the broker was down, {result['unsent']} failed sends"
    )
    print(
        f"  lost: {len(result['lost'])} {result['lost_by_phase']}; unanswered: {result['unanswered']}; "
        f"answers repeated: {result['repeated_answers']}; sent again after a kill: {result.get('resent', 0)}"
    )
