"""``ctxbus bench fleet``'s run on its own broker and data directory, and its report for people."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbus.adapters.broker_embedded import EmbeddedBroker
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.bench.fleet import FleetPlan, FleetRun
from ctxbus.bench.stack import load_memories
from ctxbus.components import open_embedder
from ctxbus.settings import KafkaSettings, Settings


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(plan: FleetPlan, memories: int, *, keep: bool = False, say: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """One fleet run; its figures (the data directory and the members' logs kept when it failed, or with ``keep``)."""
    root = Path(tempfile.mkdtemp(prefix="ctxbus-fleet-"))
    ok = False
    try:
        template = root / "template"
        say(f"loading {memories} memories into {template}")
        load_memories(Settings(data_dir=template), memories)
        embedder = open_embedder(Settings(data_dir=root))
        with EmbeddedBroker(log_file=root / "broker.log") as broker:
            kafka = KafkaSettings(
                bootstrap_servers=broker.bootstrap_servers,
                enable_idempotence=False,
                fetch_max_wait_ms=5,
                topic_partitions=plan.partitions,
            )
            config = KafkaClientConfig(kafka, broker.bootstrap_servers, embedded=True)
            result = asyncio.run(FleetRun(plan, config, root, template, say).execute(embedder))
        figures = result.figures()
        ok = result.ok
        figures["data_dir"] = None if ok and not keep else str(root)
        return figures
    finally:
        if ok and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"kept {root} (members' logs under members/)")


def print_report(figures: dict[str, Any]) -> None:
    print(
        f"fleet: {figures['requests']} requests ({figures['retries']} retries after {figures['attempts']} attempts), "
        f"{figures['outcomes']} session and {figures['task_outcomes']} task outcomes, "
        f"{figures['memories_through_the_bus']} memories through the bus; {figures['seconds']} s"
    )
    for event in figures["events"]:
        print(f"  {event}")
    print(
        f"agreement: {len(figures['retrievers_compared'])} retrievers ({', '.join(figures['retrievers_compared'])}) "
        f"against a single member over the same events: {figures['items']} items, "
        f"{figures['items_moved_by_learning']} moved by outcomes, {figures['disagreements']} disagreements"
    )
    for example in figures["disagreement_examples"]:
        print(f"  {example}")
    print(
        f"read your writes: {figures['retries']} retries, {figures['retries_missing_attempts']} missing an attempt "
        f"recorded before them; {figures['fence_timeouts']} pre-context waits gave up"
    )
    for example in figures["missing_examples"]:
        print(f"  {example}")
    for c in figures["catch_up"]:
        took = "never" if c["seconds"] is None else f"{c['seconds']} s"
        print(
            f"catch-up: {c['member']} read {c['records']} records of its state topics in {took} after its start "
            f"({c['cpu_s']} s of CPU by then, its start and the model included)"
        )
    print("ok" if figures["ok"] else "FAILED")
