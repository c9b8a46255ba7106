"""Every metric the Grafana dashboard (deploy/grafana/dashboards/) queries is exported by the services.

The services run for real (retriever, injector, recorder on the test broker and a real store); one
request with context, one for a project without memories, a poison message and a retry with an
agent attempt go through, so the labelled series exist; then their /metrics endpoint is scraped
over HTTP and every metric name in the dashboard's PromQL must be among the exported samples.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.reply import request_injection
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import AttemptRecorded, AttemptStatus, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import Embedder
from ctxbus.settings import Settings
from ctxbus.state_groups import member_groups
from ctxbus.wiring import Resources

from .kafka_io import send_raw, wait_caught_up

pytestmark = pytest.mark.integration

DASHBOARDS = Path(__file__).resolve().parents[2] / "deploy/grafana/dashboards"
#: counters that get their first sample only when something fails (until then /metrics declares them
#: with HELP and TYPE and no sample): the scrape must declare them
NEEDS_A_FAILURE = {"ctxbus_handler_retries_total"}
#: PromQL words that look like metric names but are not
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
_NAME = re.compile(r"(?<![A-Za-z0-9_.:])[A-Za-z_:][A-Za-z0-9_:]*")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, label names, grouping and keywords left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    names = set()
    for match in _NAME.finditer(text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function
        if match.group(0) not in _KEYWORDS:
            names.add(match.group(0))
    return names


def dashboard_queries() -> dict[str, set[str]]:
    """metric name -> titles of the panels that query it, over every provisioned dashboard."""
    used: dict[str, set[str]] = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                for name in promql_metric_names(target["expr"]):
                    used.setdefault(name, set()).add(f"{path.name}: {panel['title']}")
    return used


def test_metric_names_are_taken_from_promql() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, stage) (rate(ctxbus_stage_seconds_bucket{service="retriever"}'
        "[$__rate_interval]))) / on (job) group_left sum(rate(ctxbus_x_count[5m])) > bool 1e3"
    )
    assert promql_metric_names(expr) == {"ctxbus_stage_seconds_bucket", "ctxbus_x_count"}
    assert promql_metric_names("max(ctxbus_consumer_lag) - 0.5") == {"ctxbus_consumer_lag"}
    used = dashboard_queries()
    # the dashboard covers what the issue asks for
    for name in (
        "ctxbus_events_consumed_total",
        "ctxbus_events_produced_total",
        "ctxbus_consumer_lag",
        "ctxbus_end_to_end_seconds_bucket",
        "ctxbus_stage_seconds_bucket",
        "ctxbus_dead_letters_total",
        "ctxbus_injection_chars_bucket",
        "context_injection_count_total",
    ):
        assert name in used, f"the dashboard does not query {name}"


def scrape(port: int) -> tuple[set[str], set[str]]:
    """(sample names with at least one sample, metric families declared) of a /metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    samples, families = set(), set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        samples.update(sample.name for sample in family.samples)
    return samples, families


def consumer_lag(port: int) -> dict[tuple[str, str, str], float]:
    """(service, topic, partition) -> ctxbus_consumer_lag, as scraped."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.labels["service"], s.labels["topic"], s.labels["partition"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "ctxbus_consumer_lag"
        for s in family.samples
    }


def request(
    prompt: str, project: str, trigger: Trigger = Trigger.USER_PROMPT, task_id: str | None = None
) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="copilot", prompt=prompt, trigger=trigger, task_id=task_id)
    return Envelope.root(payload, project=project, session_id="grafana-task", producer="test")


async def test_every_metric_the_dashboard_queries_is_exported(
    running_pipeline: Resources, embedder: Embedder, kafka: KafkaClientConfig, topics: Topics, settings: Settings
) -> None:
    used = dashboard_queries()
    assert running_pipeline.store is not None
    memory = MemoryItem(
        id="pagination",
        project="acme/web",
        kind=MemoryKind.PATTERN,
        title="Pagination totals",
        content="Vehicle listings pagination must return the total count as a number.",
        confidence=0.9,
    )
    running_pipeline.store.upsert([memory], [embedder.embed_query(memory.embedding_text())])
    # what the services' own /metrics serves: `ctxbus up` and `ctxbus run` serve this registry (Metrics.serve)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=running_pipeline.metrics.registry)
    try:
        answered = await request_injection(
            kafka, topics, request("Fix the vehicle listings pagination", "acme/web"), 60, client_id="t"
        )
        assert answered.payload.item_ids == ("pagination",)
        empty = await request_injection(kafka, topics, request("anything", "nobody/else"), 60, client_id="t")
        assert empty.payload.empty_reason == "no_memories_in_project"
        await send_raw(kafka, topics.retrieval_requested, b"not an event")  # poison: a dead letter
        attempt = AttemptRecorded(
            task_id="vehicles-1", attempt_number=1, provider="gemini", status=AttemptStatus.FAILED, exit_reason="tests"
        )
        async with EventPublisher(kafka, "t") as pub:
            await pub.publish(
                topics.attempt_recorded,
                Envelope.root(attempt, project="acme/web", session_id="grafana-task", producer="test"),
            )
        await wait_caught_up(kafka, member_groups(settings)["attempts"], topics.attempt_recorded)
        retry = request("Fix the vehicle listings pagination", "acme/web", trigger=Trigger.RETRY, task_id="vehicles-1")
        retried = await request_injection(kafka, topics, retry, 60, client_id="t")
        assert retried.payload.context.startswith("--- RETRY CONTEXT ---")

        port = int(server.server_port)
        wanted = set(used) - NEEDS_A_FAILURE
        deadline = time.monotonic() + 30
        while True:  # the recorder and the dead letter are asynchronous to the replies
            samples, families = await asyncio.to_thread(scrape, port)
            missing = wanted - samples
            if not missing or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert not missing, {name: sorted(used[name]) for name in sorted(missing)}
        for name in NEEDS_A_FAILURE & set(used):
            assert name.removesuffix("_total") in families, f"{name} is not declared by /metrics"

        # consumer lag: every loop reports its partitions, and once all is read it is zero everywhere
        deadline = time.monotonic() + 15
        while True:
            lag = await asyncio.to_thread(consumer_lag, port)
            if (lag and not any(lag.values())) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert {(service, topic) for service, topic, _ in lag} >= {
            ("retriever", topics.retrieval_requested),
            ("injector", topics.retrieval_completed),
            ("recorder", topics.context_injected),
            ("attempts", topics.attempt_recorded),
        }
        assert {p for service, topic, p in lag if service == "retriever"} == {"0", "1", "2"}
        assert not any(lag.values()), lag
    finally:
        server.shutdown()
        server.server_close()
