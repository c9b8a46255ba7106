"""What a chaos run does and when: the schedule of kills, the stall and the poison over the load, which
poison goes where (and which consumer groups must dead-letter it), and the services' environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ctxbus.bench.poison import Poison, corpus
from ctxbus.contract.topics import Topics

PARTITIONS = 3


@dataclass(frozen=True, slots=True)
class Plan:
    requests: int
    rate: float
    kills: int
    stall_s: float
    memories: int

    @property
    def duration_s(self) -> float:
        return self.requests / self.rate

    def kill_at(self, i: int) -> float:
        """Kills spread evenly over the load."""
        return self.duration_s * (i + 1) / (self.kills + 1)

    @property
    def stall_at(self) -> float:
        """Half-way between two kills near the middle of the load."""
        return self.duration_s * (self.kills // 2 + 0.5) / (self.kills + 1)

    def poison_at(self, j: int, count: int) -> float:
        """Poison spread from 5 % to 90 % of the load."""
        return self.duration_s * (0.05 + 0.85 * j / max(1, count - 1))


def poison_plan(topics: Topics, groups: Mapping[str, str]) -> list[tuple[Poison, str, tuple[str, ...]]]:
    """(record, topic, the consumer groups that must dead-letter it): the whole corpus on the request topic,
    the oversize records also on the completed topic (the injector) and the injected topic (the recorder and
    the retriever's learning loop). ``groups``: loop -> its group (``ctxbus.state_groups.member_groups``)."""
    group = groups.__getitem__
    cases = corpus()
    plan: list[tuple[Poison, str, tuple[str, ...]]] = [
        (case, topics.retrieval_requested, (group("retriever"),)) for case in cases
    ]
    for case in (c for c in cases if c.reason == "oversize"):
        plan.append((case, topics.retrieval_completed, (group("injector"),)))
        plan.append((case, topics.context_injected, (group("recorder"), group("learning-injections"))))
    return plan


def service_env(data_dir: Path, prefix: str, bootstrap: str) -> dict[str, str]:
    """The services' environment: this one without its Kafka and service settings (defaults: 1 MiB records,
    no fault injection), on the run's broker, data directory and topic prefix, logging JSON at INFO."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXBUS_KAFKA_", "CTXBUS_SERVICE_", "CTXBUS_LOG"))}
    env.update(
        CTXBUS_DATA_DIR=str(data_dir),
        CTXBUS_TOPIC_PREFIX=prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_KAFKA_TOPIC_PARTITIONS=str(PARTITIONS),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_LOG_LEVEL="INFO",
        CTXBUS_LOG_FORMAT="json",
    )
    return env
