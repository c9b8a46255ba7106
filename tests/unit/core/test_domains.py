"""Domain detection from the prompt and the mentioned files: confident or nothing, linear in the input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxbus.core.domains import (
    AMBIGUOUS,
    DETECTED,
    NO_EVIDENCE,
    NO_VOCABULARY,
    WEAK_EVIDENCE,
    DetectionPolicy,
    detect_domain,
)

from ..time_budget import assert_scales_linearly, assert_within_budget

STORE = ("auth", "database", "api", "frontend", "testing", "messaging", "deployment", "observability")


def domain(prompt: str, files: tuple[str, ...] = (), vocabulary: tuple[str, ...] = STORE) -> str | None:
    return detect_domain(prompt, files, vocabulary).domain


@pytest.mark.parametrize(
    ("prompt", "files", "expected"),
    [
        ("Rotate the JWT signing key and publish the new kid", (), "auth"),
        ("Write the alembic migration that adds the column", (), "database"),
        ("Look at the failing check", ("src/auth/login.py",), "auth"),
        ("Tidy up the code under src/auth/ before the release", (), "auth"),
        ("Kafka consumer offsets are committed too early", (), "messaging"),
        ("The React component re-renders on every keystroke", (), "frontend"),
        ("a flaky pytest fixture", (), "testing"),
    ],
)
def test_keywords_names_and_paths_point_at_a_domain(prompt: str, files: tuple[str, ...], expected: str) -> None:
    found = detect_domain(prompt, files, STORE)
    assert (found.domain, found.reason) == (expected, DETECTED)
    assert found.terms[expected]


def test_only_domains_the_store_holds_are_detected_under_the_stores_own_name() -> None:
    assert domain("Rotate the JWT signing key", vocabulary=("database", "api")) is None
    assert domain("Rotate the JWT signing key", vocabulary=("Authentication", "database")) == "authentication"
    assert domain("Fix rounding in the billing export", vocabulary=("billing", "api")) == "billing"
    assert detect_domain("Rotate the JWT signing key", (), ()).reason == NO_VOCABULARY


def test_weak_ambiguous_or_absent_evidence_gives_no_domain() -> None:
    weak = detect_domain("the token looks odd", (), STORE)
    assert (weak.domain, weak.reason) == (None, WEAK_EVIDENCE) and weak.evidence == {"auth": 1.0}
    mixed = detect_domain("Send a JWT with every Kafka message", (), STORE)
    assert (mixed.domain, mixed.reason) == (None, AMBIGUOUS) and set(mixed.evidence) == {"auth", "messaging"}
    assert detect_domain("make it nicer please", (), STORE).reason == NO_EVIDENCE
    strict = detect_domain("Rotate the JWT signing key", (), STORE, policy=DetectionPolicy(min_evidence=3))
    assert strict.domain is None and strict.reason == WEAK_EVIDENCE


def test_repetition_adds_no_evidence_and_routes_and_urls_are_not_paths() -> None:
    assert detect_domain("token " * 500, (), STORE).evidence == {"auth": 1.0}
    # an HTTP route or a URL is not a source path: its words count once, as plain words
    assert detect_domain("poll /api/payouts more often", (), STORE).evidence == {"api": 2.0}
    url = detect_domain("see https://example.com/api/auth", (), STORE)
    assert url.evidence["auth"] == 2.0 and url.evidence["api"] == 3.0  # names (and https: http), not paths
    assert detect_domain("edit src/api/payouts.py", (), STORE).evidence == {"api": 4.0}


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="min_evidence"):
        DetectionPolicy(min_evidence=0)
    with pytest.raises(ValueError, match="min_ratio"):
        DetectionPolicy(min_ratio=0.5)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "a" * n,
        lambda n: "/" * n,
        lambda n: "a/" * (n // 2),
        lambda n: "-_-." * (n // 4),
        lambda n: "src/" * (n // 4) + "auth",
        lambda n: "jwt kafka " * (n // 10),
        lambda n: " ".join(f"w{i}" for i in range(n // 5)),
    ],
    ids=["letters", "slashes", "a/", "-_-.", "src/ then auth", "two domain words", "unique words"],
)
def test_long_adversarial_input_takes_linear_time(make: Callable[[int], str]) -> None:
    """Linear-time by construction (one regex without nested repetition, str.split, set lookups): the CPU time
    grows with the text as linear work does, not as a quadratic blow-up (tests/unit/time_budget.py)."""
    vocabulary = (*STORE, *(f"d{i}" for i in range(200)))

    def check(text: str) -> None:
        assert_within_budget(detect_domain, text, (text[:5_000],), vocabulary)

    assert_scales_linearly(lambda n: check(make(n)))
