"""The gateway embeds a hook's query while its request crosses the bus, and the retriever of the same process
takes that vector instead of embedding the prompt again (ctxbus up: gateway and retriever share one process)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.components import open_store
from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.contract.topics import Topics
from ctxbus.hooks.wire import read_secret
from ctxbus.memory.ingest import ingest
from ctxbus.memory.pattern_file import parse_pattern_file
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, Vector
from ctxbus.settings import GatewaySettings, Settings
from ctxbus.wiring import SERVICES, Resources, run_gateway, run_services

from .test_hooks import make_repo, prompt_input

pytestmark = pytest.mark.integration

PROMPT = "Fix login after password reset"


class CountingEmbedder:
    """The real embedder, counting the queries it is asked to embed one by one."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.queries: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    @property
    def max_tokens(self) -> int:
        return self._inner.max_tokens

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self._inner.embed(texts)

    def embed_query(self, text: str) -> Vector:
        with self._lock:
            self.queries[text] += 1
        return self._inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)


@dataclass
class SpyResources(Resources):
    warmed: list[str] = field(default_factory=list)

    def warm_query(self, request: RetrievalRequested) -> None:
        self.warmed.append(request.prompt)
        super().warm_query(request)


async def _post(port: int, body: bytes, data_dir: Path) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {read_secret({}, str(data_dir))}"}

    def post() -> dict[str, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/hooks", data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=20) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    return await asyncio.to_thread(post)


@pytest.fixture
async def shared(
    settings: Settings, kafka: KafkaClientConfig, topics: Topics, embedder: Embedder, tmp_path: Path
) -> AsyncIterator[tuple[int, Path, SpyResources, CountingEmbedder]]:
    """The services and the gateway in this test's loop, sharing resources as in ``ctxbus up`` (``topics``: created)."""
    repo = make_repo(tmp_path)
    counting = CountingEmbedder(embedder)
    store = open_store(settings, embedder)
    ingest(parse_pattern_file(repo / ".claude" / "learned_patterns.json", project="acme/web").items, embedder, store)
    gw_settings = settings.model_copy(update={"gateway": GatewaySettings(port=0)})
    metrics = Metrics()
    resources = SpyResources(gw_settings, metrics, counting, store)
    stop = asyncio.Event()
    ports: list[int] = []
    ready = asyncio.Event()
    services = asyncio.create_task(run_services(SERVICES, gw_settings, kafka, metrics, stop, resources, ready.set))
    gateway = asyncio.create_task(
        run_gateway(gw_settings, kafka, metrics, stop, on_ready=ports.append, resources=resources)
    )
    started = asyncio.create_task(ready.wait())
    await asyncio.wait({started, services, gateway}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    for task in (services, gateway):
        if task.done():  # a part that could not start: its error, not a wait until the timeout
            task.result()
    assert started.done(), "the services were not ready within 60 s"
    while not ports:
        await asyncio.sleep(0.05)
    try:
        yield ports[0], repo, resources, counting
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(services, gateway), 30)


async def test_the_gateway_warms_the_query_and_the_retriever_does_not_embed_it_again(
    shared: tuple[int, Path, SpyResources, CountingEmbedder], settings: Settings
) -> None:
    port, repo, resources, counting = shared
    answer = await _post(port, prompt_input(repo, PROMPT), settings.data_dir)
    assert "Password reset revokes sessions" in answer["hookSpecificOutput"]["additionalContext"]
    assert resources.warmed == [PROMPT]  # the gateway started the embedding while the request was published
    assert counting.queries[PROMPT] == 1  # ... and the retriever took that vector: the prompt embedded once
    again = await _post(port, prompt_input(repo, PROMPT), settings.data_dir)
    assert again == answer and counting.queries[PROMPT] == 1  # asked again: remembered, warm or not


async def test_a_meta_prompt_is_not_warmed(
    shared: tuple[int, Path, SpyResources, CountingEmbedder], settings: Settings
) -> None:
    port, repo, resources, counting = shared
    answer = await _post(port, prompt_input(repo, "ok"), settings.data_dir)
    assert answer["hookSpecificOutput"]["additionalContext"] == ""
    assert resources.warmed == ["ok"] and not counting.queries  # asked, but the retriever embeds nothing for it
