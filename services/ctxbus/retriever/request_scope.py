"""What a retrieval request asks for beyond its prompt: its context profile (with overrides) and its domain."""

from __future__ import annotations

import json

from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.core.profiles import ContextProfile, InvalidOverride, apply_overrides, resolve_profile

#: Where a completed event's domain came from.
DOMAIN_FROM_REQUEST = "request"
DOMAIN_DETECTED = "detected"


def profile_for(request: RetrievalRequested) -> ContextProfile:
    """The request's context profile (its agent role; seed 004 aliases accepted) with its overrides.

    Raises UnknownProfile (listing the valid names) or InvalidOverride.
    """
    profile = resolve_profile(request.agent_role)
    if not request.profile_overrides:
        return profile
    decoded: dict[str, object] = {}
    for key, raw in request.profile_overrides.items():
        try:
            decoded[key] = json.loads(raw)
        except ValueError as exc:
            raise InvalidOverride(f"profile override {key!r} is not JSON: {raw!r}") from exc
    return apply_overrides(profile, decoded)


def request_domain(request: RetrievalRequested) -> str | None:
    """The request's own domain, stripped and lower-cased like item domains (None: none given)."""
    return request.domain.strip().lower() or None if request.domain else None


def strict_domain(request: RetrievalRequested) -> str | None:
    """The domain every candidate must carry: the request's, when it asks for a strict domain."""
    return request_domain(request) if request.strict_domain else None
