"""A 100,000-character prompt through the real stack (gateway, broker, retriever, injector, recorder in this
process, as ``ctxbus up`` runs them): it is answered from the pipeline, and while its retrieval runs the
gateway and ``/metrics`` keep answering (issue 10, finding 2: a pasted hex blob froze them for 31 s)."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.payloads import MAX_PROMPT_CHARS
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret
from ctxbus.memory.ingest import ingest
from ctxbus.memory.model import MemoryItem
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder
from ctxbus.settings import GatewaySettings, HookSettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

pytestmark = pytest.mark.integration

PROJECT = "acme/web"
HEAD = "Fix login after password reset: "
#: a probe waiting this long means the process stalled (each one takes milliseconds)
PATIENCE_S = 2.0


@dataclass(frozen=True, slots=True)
class Stack:
    gateway: int
    metrics: int
    repo: Path
    #: the installation's secret the gateway made in its data dir (every endpoint but /healthz needs it)
    secret: str = ""


@pytest.fixture
async def stack(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[Stack]:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "ctxbus.json").write_text(json.dumps({"project": PROJECT}))
    store = open_store(settings, embedder)
    memory = MemoryItem(
        id="reset-revokes",
        project=PROJECT,
        kind="pattern",
        title="Password reset revokes sessions",
        content="After a password reset, revoke refresh tokens and clear the session cache so login works again.",
        domains=("auth",),
        confidence=0.9,
    )
    ingest([memory], embedder, store)
    # a hook budget long enough that an answer is the pipeline's, never the file fallback's
    # the relevance floor is off: this test is about time (a 100k prompt of repeated dotted names is, fairly,
    # judged not relevant enough by it), and its answer must show the pipeline did the work
    no_floor = settings.injection.model_copy(update={"min_relevance": -2.0})
    stack_settings = settings.model_copy(
        update={"gateway": GatewaySettings(port=0), "hook": HookSettings(timeout_ms=20_000), "injection": no_floor}
    )
    metrics = Metrics()
    metrics_port = metrics.serve("127.0.0.1", 0)
    stop, ready = asyncio.Event(), asyncio.Event()
    ports: list[int] = []
    resources = Resources(stack_settings, metrics, embedder, store)
    services = asyncio.create_task(
        run_services(SERVICES, stack_settings, kafka, metrics, stop, resources, on_ready=ready.set)
    )
    gateway = asyncio.create_task(run_gateway(stack_settings, kafka, metrics, stop, on_ready=ports.append))
    await asyncio.wait_for(ready.wait(), 60)
    while not ports:
        await asyncio.sleep(0.05)
    try:
        yield Stack(ports[0], metrics_port, repo, read_secret({}, str(stack_settings.data_dir)) or "")
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)


def ask(stack: Stack, prompt: str, session: str) -> str:
    body = json.dumps(
        {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": str(stack.repo), "prompt": prompt}
    ).encode()
    headers = {"Authorization": f"Bearer {stack.secret}"}
    request = urllib.request.Request(f"http://127.0.0.1:{stack.gateway}/v1/hooks", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as answer:
        context: str = json.loads(answer.read())["hookSpecificOutput"]["additionalContext"]
    return context


@dataclass
class Probe:
    """Answers to GET ``url`` every 20 ms: (started, finished) of each."""

    url: str
    answered: list[tuple[float, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            with urllib.request.urlopen(self.url, timeout=120) as answer:
                answer.read()
            self.answered.append((started, time.monotonic()))
            time.sleep(0.02)

    def within(self, start: float, end: float) -> int:
        """How many began and ended between ``start`` and ``end``."""
        return sum(1 for began, finished in self.answered if began >= start and finished <= end)

    def slowest(self, start: float, end: float) -> float:
        """The longest wait of those that began between ``start`` and ``end``."""
        return max((finished - began for began, finished in self.answered if start <= began <= end), default=0.0)


def hex_blob(chars: int) -> str:
    rng = random.Random(10)
    return "".join(rng.choice("0123456789abcdef") for _ in range(chars))


@pytest.mark.slow
@pytest.mark.parametrize(
    "blob",
    [
        pytest.param(hex_blob(MAX_PROMPT_CHARS - len(HEAD)), id="hex blob"),
        pytest.param("org.apache.kafka.clients.consumer.KafkaConsumer." * 2_100, id="dotted names, no spaces"),
    ],
)
async def test_the_gateway_and_metrics_answer_while_a_100k_prompt_is_retrieved(stack: Stack, blob: str) -> None:
    prompt = (HEAD + blob)[:MAX_PROMPT_CHARS]
    assert len(prompt) == MAX_PROMPT_CHARS
    # the pipeline answers normally first (consumer groups joined, model warm)
    assert "Password reset revokes sessions" in await asyncio.to_thread(ask, stack, HEAD, "s0")

    probes = [Probe(f"http://127.0.0.1:{stack.gateway}/healthz"), Probe(f"http://127.0.0.1:{stack.metrics}/metrics")]
    threads = [threading.Thread(target=p.run, daemon=True) for p in probes]
    started = time.monotonic()
    big = asyncio.create_task(asyncio.to_thread(ask, stack, prompt, "s1"))
    for thread in threads:
        thread.start()
    try:
        context = await big
    finally:
        finished = time.monotonic()
        for probe in probes:
            probe.stop.set()
        for thread in threads:
            await asyncio.to_thread(thread.join, 130)

    assert "Password reset revokes sessions" in context  # answered by the pipeline, not a fallback
    for probe in probes:
        assert probe.within(started, finished) >= 1, f"{probe.url} did not answer during the large request"
        # not a latency target (a probe takes milliseconds): a stalled process makes a probe wait seconds
        assert probe.slowest(started, finished) < PATIENCE_S, f"{probe.url} stalled during the large request"
