"""A deterministic synthetic corpus of software-practice memories and prompts, for benchmarks."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from ctxbus.memory.model import MemoryItem, MemoryKind

DOMAINS: dict[str, tuple[str, ...]] = {
    "auth": ("login", "password reset", "session tokens", "OAuth2 callback", "JWT refresh", "MFA codes"),
    "database": ("migrations", "connection pooling", "slow queries", "indexes", "transactions", "deadlocks"),
    "api": ("pagination", "rate limiting", "error responses", "versioning", "request validation", "timeouts"),
    "frontend": ("form state", "rendering performance", "accessibility", "routing", "bundle size", "hydration"),
    "testing": ("flaky tests", "fixtures", "integration tests", "mocks", "property tests", "coverage gaps"),
    "kafka": ("consumer lag", "offset commits", "rebalancing", "dead letters", "partition keys", "idempotence"),
    "deploy": ("rollbacks", "health checks", "config drift", "secrets", "canary releases", "container images"),
    "observability": ("structured logs", "trace ids", "metrics cardinality", "alerts", "dashboards", "sampling"),
}
ACTIONS = (
    "Always {verb} {topic} in the {domain} layer before merging",
    "When touching {topic}, {verb} it behind a feature flag and add a regression test",
    "We {verb} {topic} with a dedicated helper; calling the driver directly caused incidents",
    "For {topic} problems, first {verb} the logs with the correlation id of the failing request",
    "Prefer to {verb} {topic} at the boundary of the {domain} module, never deep inside handlers",
)
VERBS = ("validate", "isolate", "measure", "retry", "document", "review", "cache", "trace")
PROMPT_TEMPLATES = (
    "Fix {topic} in the {domain} code, it broke after the last release",
    "Add {topic} support to our {domain} service",
    "Why does {topic} fail intermittently in {domain}?",
    "Refactor the {domain} {topic} logic into something testable",
    "Review the change to {topic} in {domain}",
)
KINDS = (MemoryKind.PATTERN, MemoryKind.PRINCIPLE, MemoryKind.WARNING, MemoryKind.LEARNING, MemoryKind.CONVENTION)


def memories(count: int, project: str, *, seed: int = 7, now: datetime | None = None) -> list[MemoryItem]:
    rng = random.Random(seed)
    now = now or datetime.now(UTC)
    domains = list(DOMAINS)
    items = []
    for i in range(count):
        domain = domains[i % len(domains)]
        topic = rng.choice(DOMAINS[domain])
        text = rng.choice(ACTIONS).format(verb=rng.choice(VERBS), topic=topic, domain=domain)
        created = now - timedelta(days=rng.randint(0, 365))
        items.append(
            MemoryItem(
                id=f"m{i:06d}",
                project=project,
                kind=KINDS[i % len(KINDS)],
                title=f"{topic.capitalize()} ({domain}) #{i}",
                content=f"{text}. Seen in task {i}.",
                domains=(domain,),
                confidence=round(rng.uniform(0.5, 1.0), 2),
                usage_count=rng.randint(0, 40),
                success_rate=round(rng.uniform(0.3, 1.0), 2),
                created_at=created,
                updated_at=created,
            )
        )
    return items


def prompts(count: int, *, seed: int = 11) -> list[tuple[str, str]]:
    """(domain, prompt) pairs."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        domain = rng.choice(list(DOMAINS))
        topic = rng.choice(DOMAINS[domain])
        out.append((domain, rng.choice(PROMPT_TEMPLATES).format(topic=topic, domain=domain)))
    return out
