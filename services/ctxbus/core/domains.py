"""Domain detection: the domain a request is about, from its prompt and the files it mentions.

Used when a request names no domain. Pure, and linear in the length of the input: the prompt (its
first ``QUERY_TERMS_CHARS`` characters, what the keyword query reads) is split into words once (one
regular expression without nested repetition, and ``str.split``), and every word is looked up in
dictionaries.

**Vocabulary.** Only domains the project's store holds can be detected: the caller passes them
(the retriever passes the domains of the candidates its search found). ``LEXICON`` knows common
software domains under several names (``auth`` / ``authentication`` / ``identity`` ...) with the
words that point at them; a store domain the lexicon does not know is detected from its own name.

**Evidence** per domain, each distinct word counted once (repeating a word adds nothing):

* the domain's name or an alias as a word of the prompt: ``NAME_WEIGHT``;
* a lexicon keyword: ``STRONG_WEIGHT`` for a term that names a technology of that domain only
  (``jwt``, ``alembic``, ``kafka``), ``WEAK_WEIGHT`` for a word that merely leans (``login``, ``slow``);
* any of these in a path (a mentioned file, or a prompt word with a ``/``, like ``src/auth/``)
  counts ``PATH_FACTOR`` times.

**Confident or nothing.** The best domain is detected only when its evidence is at least
``min_evidence`` and at least ``min_ratio`` times the runner-up's; otherwise no domain (a
multi-domain task gets none rather than a wrong one). ``DomainDetection.reason`` says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from ctxbus.core.bounds import QUERY_TERMS_CHARS, prefix

NAME_WEIGHT = 2.0
STRONG_WEIGHT = 2.0
WEAK_WEIGHT = 1.0
PATH_FACTOR = 2.0

DETECTED = "detected"
NO_VOCABULARY = "no_vocabulary"
NO_EVIDENCE = "no_evidence"
WEAK_EVIDENCE = "weak_evidence"
AMBIGUOUS = "ambiguous"

#: Words: letters and digits (``_`` and ``-`` split words, so ``refresh_token`` is ``refresh token``).
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class DomainTerms:
    """One domain of the lexicon: its names (any may be the store's label) and its keywords."""

    names: frozenset[str]
    strong: frozenset[str]
    weak: frozenset[str] = frozenset()


def _terms(names: str, strong: str, weak: str = "") -> DomainTerms:
    return DomainTerms(frozenset(names.split()), frozenset(strong.split()), frozenset(weak.split()))


#: Common software domains (written from general engineering vocabulary). Multi-word terms are
#: written with ``-`` (``refresh-token`` matches "refresh token", "refresh_token", "refresh-token").
LEXICON: tuple[DomainTerms, ...] = (
    _terms(
        "auth authentication authorization identity iam",
        "jwt jwks oauth oauth2 oidc saml sso keycloak rbac mfa 2fa totp refresh-token access-token bearer "
        "login logout signin signup password passwords",
        "token tokens credential credentials permission permissions role roles scope scopes",
    ),
    _terms(
        "database databases db persistence",
        "sql postgres postgresql mysql mariadb sqlite sqlalchemy alembic migration migrations orm pgbouncer "
        "deadlock vacuum replica",
        "table tables column columns index indexes transaction transactions schema backfill",
    ),
    _terms(
        "api apis rest",
        "endpoint endpoints openapi swagger graphql grpc fastapi flask pagination webhook webhooks",
        "route routes router status-code http",
    ),
    _terms(
        "frontend front-end ui web",
        "react nextjs next-js vue angular svelte css html dom jsx tsx redux hydration webpack vite tailwind "
        "storybook spa",
        "component components browser page render rendering",
    ),
    _terms(
        "testing tests test qa",
        "pytest unittest jest vitest playwright cypress testcontainers flaky e2e tdd",
        "fixture fixtures mock mocks stub stubs coverage snapshot assertion",
    ),
    _terms(
        "deployment deployments deploy infrastructure infra devops release",
        "kubernetes k8s helm dockerfile docker argo terraform canary rollout rollouts",
        "container containers image images pod pods staging",
    ),
    _terms(
        "security appsec infosec",
        "xss csrf ssrf vulnerability cve kms vault tls ssl csp encryption encrypt gdpr bandit",
        "secret secrets certificate pii sanitize audit",
    ),
    _terms(
        "performance perf",
        "latency throughput profiling bottleneck n-1 p99",
        "slow slower faster speed cache caching cpu memory optimize optimise",
    ),
    _terms(
        "observability monitoring logging telemetry",
        "prometheus grafana opentelemetry otel tracing sentry slo",
        "log logs metric metrics trace traces alert alerts alerting span",
    ),
    _terms(
        "messaging events streaming queue queues",
        "kafka rabbitmq amqp sqs pubsub outbox dead-letter dlq avro",
        "topic topics consumer consumers producer offset offsets partition partitions",
    ),
    _terms(
        "concurrency async parallelism threading",
        "asyncio mutex semaphore race-condition goroutine",
        "thread threads lock locks concurrent parallel",
    ),
    _terms(
        "python-packaging packaging dependencies",
        "pip pipx poetry uv pyproject setuptools wheel pip-compile pip-tools virtualenv venv pypi hatch",
        "requirements lockfile",
    ),
)


@dataclass(frozen=True, slots=True)
class DetectionPolicy:
    """The thresholds of a confident detection."""

    min_evidence: float = 2.0
    min_ratio: float = 2.0

    def __post_init__(self) -> None:
        if self.min_evidence <= 0 or self.min_ratio < 1:
            raise ValueError("min_evidence must be positive and min_ratio at least 1")


@dataclass(frozen=True, slots=True)
class DomainDetection:
    """The detected domain (None: no confident one), the evidence per domain and why."""

    domain: str | None
    reason: str
    evidence: Mapping[str, float] = field(default_factory=dict)
    terms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _text_terms(words: Sequence[str]) -> set[str]:
    """The words, their singulars and the ``-`` joins of neighbouring words (for multi-word terms)."""
    terms = set(words)
    terms.update(_singular(w) for w in words)
    terms.update(f"{a}-{b}" for a, b in pairwise(words))
    return terms


def _path_words(prompt: str, files: Iterable[str]) -> list[str]:
    """Words of the mentioned files and of prompt tokens that look like paths (hold a ``/``, not a URL)."""
    paths = [f for f in files if f]
    # a prompt word with a ``/`` is a path (``src/auth/``); not a URL, nor a word starting with ``/``
    # (an HTTP route like ``/api/me`` more often than a file; absolute file paths come in ``files``)
    paths += [
        token for token in prompt.split() if "/" in token[1:] and not token.startswith("/") and "://" not in token
    ]
    return [w for path in paths for w in _words(path)]


def _vocabulary(vocabulary: Iterable[str]) -> dict[str, DomainTerms | None]:
    """Each store domain -> its lexicon entry (None: not in the lexicon, detected by its own name)."""
    by_name = {name: entry for entry in LEXICON for name in entry.names}
    out: dict[str, DomainTerms | None] = {}
    for raw in vocabulary:
        domain = raw.strip().lower()
        if domain:
            out[domain] = by_name.get(domain)
    return out


def _evidence(domain: str, entry: DomainTerms | None, terms: set[str], factor: float) -> dict[str, float]:
    """Matched term -> weight, for one domain and one body of terms."""
    found: dict[str, float] = {}
    own = "-".join(_words(domain))
    names = (entry.names if entry else frozenset()) | {own}
    for name in names:
        key = "-".join(_words(name))
        if key in terms:
            found[name] = NAME_WEIGHT * factor
    if entry is not None:
        for word in entry.strong & terms:
            found[word] = STRONG_WEIGHT * factor
        for word in entry.weak & terms:
            found.setdefault(word, WEAK_WEIGHT * factor)
    return found


def detect_domain(
    prompt: str,
    files: Sequence[str] = (),
    vocabulary: Iterable[str] = (),
    *,
    policy: DetectionPolicy | None = None,
) -> DomainDetection:
    """The domain of ``vocabulary`` that ``prompt`` and ``files`` are about, or None (see the module docstring)."""
    policy = policy or DetectionPolicy()
    prompt = prefix(prompt, QUERY_TERMS_CHARS)  # what the keyword query reads (ctxbus.core.bounds)
    known = _vocabulary(vocabulary)
    if not known:
        return DomainDetection(None, NO_VOCABULARY)
    prompt_terms = _text_terms(_words(prompt))
    path_terms = _text_terms(_path_words(prompt, files))
    evidence: dict[str, float] = {}
    matched: dict[str, tuple[str, ...]] = {}
    for domain, entry in known.items():
        found = _evidence(domain, entry, prompt_terms, 1.0)
        for term, weight in _evidence(domain, entry, path_terms, PATH_FACTOR).items():
            found[term] = max(found.get(term, 0.0), weight)
        if found:
            evidence[domain] = sum(found.values())
            matched[domain] = tuple(sorted(found))
    if not evidence:
        return DomainDetection(None, NO_EVIDENCE)
    ranked = sorted(evidence.items(), key=lambda kv: (-kv[1], kv[0]))
    best, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    if score < policy.min_evidence:
        return DomainDetection(None, WEAK_EVIDENCE, evidence, matched)
    if runner_up > 0 and score < policy.min_ratio * runner_up:
        return DomainDetection(None, AMBIGUOUS, evidence, matched)
    return DomainDetection(best, DETECTED, evidence, matched)
