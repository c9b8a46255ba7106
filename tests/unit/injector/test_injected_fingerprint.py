"""The injected event's fingerprint describes the context as injected (issue 25): its items, tokens,
compression and tags are what the budget let in, not the ranked candidates the retriever saw."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RankedItem, RetrievalCompleted, RetrievalRequested, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.core.fingerprint import encode_components, fingerprint
from ctxbus.core.profiles import IMPLEMENTER
from ctxbus.core.ranked_items import to_ranked_hit
from ctxbus.injector.handler import InjectorHandler
from ctxbus.observability import Metrics
from ctxbus.settings import InjectionSettings

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def ranked(n: int) -> RankedItem:
    words = " ".join(f"word{n}x{i}" for i in range(15))
    return RankedItem(
        id=f"item-{n}",
        project="acme/web",
        kind="principle" if n % 2 else "convention",
        title=f"Rule {n}",
        content=f"Sentence one about rule {n}. {words}. Sentence three closes rule {n}.",
        confidence=0.9,
        importance=0.5,
        score=1.0 - n / 100,
        domains=(f"topic-{n}",),
    )


def completed(max_tokens: int) -> Envelope[RetrievalCompleted]:
    items = tuple(ranked(n) for n in range(10))
    request = RetrievalRequested(
        agent_name="claude-code",
        prompt="Fix login after password reset",
        trigger=Trigger.USER_PROMPT,
        max_tokens=max_tokens,
        include={"suggested_approach": False},
    )
    mix = fingerprint(IMPLEMENTER, None, [to_ranked_hit(i) for i in items])
    payload = RetrievalCompleted(
        request=request,
        request_emitted_at=NOW,
        items=items,
        retrieval_duration_ms=1.0,
        embedding_model="test",
        profile=IMPLEMENTER.name,
        fingerprint=mix.hash,
        fingerprint_components=encode_components(mix.components),
    )
    return Envelope.root(payload, project="acme/web", session_id="s", producer="test")


async def inject(event: Envelope[RetrievalCompleted]) -> ContextInjected:
    handler = InjectorHandler(Topics("ctxbus"), Metrics(), InjectionSettings(), clock=lambda: NOW)
    [out] = await handler(event)
    payload = out.event.payload
    assert isinstance(payload, ContextInjected)
    return payload


async def test_the_fingerprint_counts_the_items_and_tokens_the_budget_let_in() -> None:
    event = completed(max_tokens=150)
    injected = await inject(event)
    components = {k: json.loads(v) for k, v in injected.fingerprint_components.items()}
    retrieval = {k: json.loads(v) for k, v in event.payload.fingerprint_components.items()}
    assert retrieval["item_count"] == 10
    assert 1 <= len(injected.item_ids) < 10
    assert components["item_count"] == len(injected.item_ids)
    assert components["tokens"] == injected.token_estimate
    assert components["tags"] == sorted(f"topic-{i.split('-')[1]}" for i in injected.item_ids)
    assert sum(components["kind_counts"].values()) == len(injected.item_ids)
    assert components["profile"] == retrieval["profile"] == "implementer"
    assert injected.fingerprint is not None and injected.fingerprint != event.payload.fingerprint


async def test_compression_says_how_much_of_the_chosen_items_the_context_kept() -> None:
    squeezed = await inject(completed(max_tokens=150))
    roomy = await inject(completed(max_tokens=20_000))
    assert json.loads(roomy.fingerprint_components["compression"]) == 1.0
    assert len(roomy.item_ids) == 10
    assert squeezed.truncated  # the implementer compresses what does not fit whole
    assert 0.0 < json.loads(squeezed.fingerprint_components["compression"]) < 1.0
