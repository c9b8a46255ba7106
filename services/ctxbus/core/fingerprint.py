"""The context fingerprint of seed 004 §5: what a completion's context was made of, as a short stable hash.

Emitted with every completion so that outcomes can later be correlated with the
context mix. ``fingerprint`` returns a ``ContextFingerprint``: ``components``
holds seed 004's fields (mode, complexity, file count, files hash, profile,
tokens, kinds, compression, tier counts, tags) plus kind counts, kind and tier
shares, the token bucket, the profile's overrides and a digest of its settings, the domain (where it
came from, whether it was strict) and the task type's profile (name and a digest of its settings);
``hash`` is a sha256 prefix over the coarse ones only (``HASHED_COMPONENTS``: the mix, not the exact
counts, the files nor the domain, which say what the task is about like the files do; the task type
is hashed as ``mode``), so similar contexts share a fingerprint and can be grouped.

Everything is derived from counts, sets and sorted lists: no randomness, no
clock, and the order of the items (and of the mentioned files and tags) does
not change the result.

Two fingerprints per request: the retriever's (on the completed event) describes the ranked candidates
before the budget; the injector's (``as_injected``, on the injected event) takes the retriever's
components and recomputes the ones that describe the context itself (``CONTEXT_COMPONENTS``) from what
the budget let in: its items, its tokens, how much compression kept, its items' tags. Outcomes are
correlated with the injected one (issue 25: the retriever's said 10 items and 443 tokens for an
injection of 1 item and 128 tokens).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxbus.contract.payloads import TaskType
from ctxbus.core.policy import item_tier
from ctxbus.core.profiles import ContextProfile, Tier, profile_settings
from ctxbus.core.ranking import RankedHit
from ctxbus.core.task_profiles import TaskTypeProfile
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem

#: Hex characters of the fingerprint hash.
FINGERPRINT_HEX_CHARS = 16
#: Hex characters of seed 004's mentioned-files hash (md5 of the sorted list).
FILES_HASH_HEX_CHARS = 8
#: Hex characters of the profile settings digest.
PROFILE_DIGEST_HEX_CHARS = 8
#: Seed 004's complexity estimate: more mentioned files than these are moderate, complex.
MODERATE_ABOVE_FILES = 2
COMPLEX_ABOVE_FILES = 5
#: Shares (of items per kind and per tier) are rounded to this step before hashing.
SHARE_STEP = 0.25
#: Upper bounds of the token buckets; more than the last is ``>last``, none is ``0``.
TOKEN_BUCKETS = (500, 1_000, 2_000, 4_000, 8_000, 16_000)
#: Decimal places of the compression ratio in the components.
COMPRESSION_DIGITS = 2
#: Mode recorded when the request has no task type.
NO_MODE = TaskType.GENERAL.value
#: The components that describe the context itself (recomputed from the injected items by ``as_injected``).
CONTEXT_COMPONENTS = (
    "item_count",
    "tokens",
    "token_bucket",
    "kinds",
    "kind_counts",
    "kind_shares",
    "tier_counts",
    "tier_shares",
    "compression",
    "tags",
)
#: At most this many distinct tags (the items' own, sorted) in the components.
MAX_TAGS = 20
#: The components the hash is computed from (the context mix, not exact counts nor files).
HASHED_COMPONENTS = (
    "profile",
    "profile_digest",
    "mode",
    "complexity",
    "token_bucket",
    "kinds",
    "kind_shares",
    "tier_shares",
)


@dataclass(frozen=True, slots=True)
class ContextFingerprint:
    """A context's fingerprint: the short hash and every component, JSON-able."""

    hash: str
    components: Mapping[str, object]

    def to_dict(self) -> dict[str, object]:
        """For telemetry: ``{"fingerprint": hash, **components}``."""
        return {"fingerprint": self.hash, **self.components}


def complexity(file_count: int) -> str:
    """Seed 004's estimate: ``complex`` above 5 mentioned files, ``moderate`` above 2, else ``simple``."""
    if file_count > COMPLEX_ABOVE_FILES:
        return "complex"
    if file_count > MODERATE_ABOVE_FILES:
        return "moderate"
    return "simple"


def files_hash(files: Iterable[str]) -> str:
    """Seed 004's hash of the mentioned files: md5 of the sorted, distinct list joined by ``|``, 8 hex."""
    joined = "|".join(sorted({f.strip() for f in files if f.strip()}))
    return hashlib.md5(joined.encode("utf-8"), usedforsecurity=False).hexdigest()[:FILES_HASH_HEX_CHARS]


def _digest(settings: Mapping[str, object]) -> str:
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:PROFILE_DIGEST_HEX_CHARS]


def profile_digest(profile: ContextProfile) -> str:
    """A short hash of every setting of the profile, so an overridden profile fingerprints apart."""
    return _digest(profile_settings(profile))


def token_bucket(tokens: int) -> str:
    """``0``, ``<=500``, ``<=1000`` ... ``<=16000``, or ``>16000``."""
    if tokens <= 0:
        return "0"
    for bound in TOKEN_BUCKETS:
        if tokens <= bound:
            return f"<={bound}"
    return f">{TOKEN_BUCKETS[-1]}"


def quantise(share: float) -> float:
    """``share`` rounded (half up) to the nearest SHARE_STEP."""
    return math.floor(share / SHARE_STEP + 0.5) * SHARE_STEP


def _shares(counts: Mapping[str, int], total: int) -> dict[str, float]:
    return {k: quantise(v / total) if total else 0.0 for k, v in sorted(counts.items())}


def _hash(components: Mapping[str, object]) -> str:
    canonical = json.dumps({k: components[k] for k in HASHED_COMPONENTS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:FINGERPRINT_HEX_CHARS]


def item_tags(items: Iterable[MemoryItem]) -> list[str]:
    """The items' tags and domains (a ranked item on the bus carries its domains, not its tags): distinct,
    stripped, lower-cased, sorted, at most MAX_TAGS."""
    return sorted({t.strip().lower() for i in items for t in (*i.tags, *i.domains) if t.strip()})[:MAX_TAGS]


def compression_kept(kept_tokens: int, original_tokens: int) -> float:
    """Seed 004's compression ratio: the share of the chosen items' tokens the context kept (1.0: none cut)."""
    if original_tokens <= 0:
        return 1.0
    return min(1.0, max(0.0, kept_tokens / original_tokens))


def _context_components(
    memory: Sequence[MemoryItem], tiers: Sequence[Tier], tokens: int, compression_ratio: float, tags: Sequence[str]
) -> dict[str, object]:
    if tokens < 0:
        raise ValueError(f"context_tokens must not be negative, got {tokens}")
    if not math.isfinite(compression_ratio) or not 0.0 <= compression_ratio <= 1.0:
        raise ValueError(f"compression_ratio must be in 0..1, got {compression_ratio}")
    kind_counts = Counter(i.kind.value for i in memory)
    tier_counts = Counter(t.value for t in tiers)
    tier_counts_all = {t.value: tier_counts.get(t.value, 0) for t in Tier}
    return {
        "item_count": len(memory),
        "tokens": tokens,
        "token_bucket": token_bucket(tokens),
        "kinds": sorted(kind_counts),
        "kind_counts": dict(sorted(kind_counts.items())),
        "kind_shares": _shares(kind_counts, len(memory)),
        "tier_counts": tier_counts_all,
        "tier_shares": _shares(tier_counts_all, len(memory)),
        "compression": round(compression_ratio, COMPRESSION_DIGITS),
        "tags": sorted({t.strip().lower() for t in tags if t.strip()})[:MAX_TAGS],
    }


def fingerprint(
    profile: ContextProfile,
    task_type: TaskType | None,
    items: Iterable[MemoryItem | RankedHit],
    *,
    mentioned_files: Sequence[str] = (),
    context_tokens: int | None = None,
    compression_ratio: float = 1.0,
    tags: Sequence[str] | None = None,
    task_id: str | None = None,
    count_tokens: Callable[[str], int] = estimate_tokens,
    domain: str | None = None,
    domain_source: str | None = None,
    strict_domain: bool = False,
    task_profile: TaskTypeProfile | None = None,
) -> ContextFingerprint:
    """The fingerprint of the context built for a request.

    ``items`` are what went into the context; ``context_tokens`` is its size (e.g.
    ``Assembly.tokens``), estimated per item with ``count_tokens`` when not given;
    ``compression_ratio`` is 1.0 for an uncompressed context; ``tags`` default to the items' own
    (``item_tags``); ``task_id`` decides which items are task memory (``policy.item_tier``).
    Raises ValueError for negative tokens or a compression ratio outside 0..1.
    """
    memory = [i.item if isinstance(i, RankedHit) else i for i in items]
    files = {f.strip() for f in mentioned_files if f.strip()}
    tokens = context_tokens if context_tokens is not None else sum(count_tokens(i.embedding_text()) for i in memory)
    tiers = [item_tier(i, task_id) for i in memory]
    context = _context_components(memory, tiers, tokens, compression_ratio, item_tags(memory) if tags is None else tags)
    components: dict[str, object] = {
        "profile": profile.name,
        "profile_digest": profile_digest(profile),
        "overrides": list(profile.overrides),
        "mode": task_type.value if task_type is not None else NO_MODE,
        "complexity": complexity(len(files)),
        "file_count": len(files),
        "files_hash": files_hash(files),
        **context,
        "domain": domain,
        "domain_source": domain_source,
        "strict_domain": strict_domain,
        "task_profile": task_profile.name if task_profile is not None else None,
        "task_profile_digest": _digest(task_profile.settings()) if task_profile is not None else None,
    }
    return ContextFingerprint(hash=_hash(components), components=components)


def decode_components(encoded: Mapping[str, str]) -> dict[str, object]:
    """An event's JSON-encoded ``fingerprint_components`` decoded (a value that is not JSON is left out)."""
    out: dict[str, object] = {}
    for key, raw in encoded.items():
        try:
            out[key] = json.loads(raw)
        except ValueError:
            continue
    return out


def encode_components(components: Mapping[str, object]) -> dict[str, str]:
    """Components as an event carries them: each value JSON-encoded (keys sorted)."""
    return {k: json.dumps(v, sort_keys=True, default=str) for k, v in components.items()}


def as_injected(
    retrieval: Mapping[str, object],
    items: Sequence[MemoryItem],
    tiers: Sequence[Tier],
    *,
    tokens: int,
    compression_ratio: float = 1.0,
) -> ContextFingerprint:
    """The fingerprint of the context as injected: the retrieval's components (profile, mode, files, domain,
    task profile: what the request was) with those describing the context (``CONTEXT_COMPONENTS``) taken
    from the injected ``items`` (``tiers``: each one's tier, as the retriever's plan scored it), their
    ``tokens``, the share compression kept and the items' tags.

    A hashed component the retrieval lacks (an event from elsewhere) is None. Raises ValueError for
    negative tokens, a compression ratio outside 0..1, or a tier count that is not the item count.
    """
    if len(tiers) != len(items):
        raise ValueError(f"{len(items)} items but {len(tiers)} tiers")
    components: dict[str, object] = {k: v for k, v in retrieval.items() if k not in CONTEXT_COMPONENTS}
    components.update(_context_components(items, tiers, tokens, compression_ratio, item_tags(items)))
    for key in HASHED_COMPONENTS:
        components.setdefault(key, None)
    return ContextFingerprint(hash=_hash(components), components=components)
