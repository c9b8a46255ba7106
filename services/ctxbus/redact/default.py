"""The default redactor: detect-secrets' plugins (Yelp's maintained ruleset) plus ctxbus's own rules.

``redact_text(text)`` is the one call every door makes (see docs/privacy.md for the doors): the gateway on each
hook input, the publisher on every event's payload, ingestion on every memory item, and session capture on what
it reads. detect-secrets is used for what it is good at: its plugins' patterns (cloud keys, tokens of a dozen
services, JWTs, checked by its own JWT validator), its private-key markers and its Shannon entropy with its
thresholds. Where it is weak (newer token formats, passwords in URLs, ``.env`` lines and assignments, headers,
``<private>`` spans) or not linear time (patterns with unbounded runs after a repeatable prefix: its npm and
basic-auth patterns, its keyword plugin), ctxbus's own rules (:mod:`ctxbus.redact.rules`) take over.

Every detect-secrets pattern is used behind a look-behind on token characters (``(?<![A-Za-z0-9_-])``): a run
that repeats the pattern's prefix is scanned once, so the whole redaction stays linear in the text's length.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from ctxbus.redact.engine import Redactor, Rule
from ctxbus.redact.keyword import KeywordRule
from ctxbus.redact.rules import AFTER, BEFORE, JWT, PRIVATE_KEY, TOKENS

#: the detect-secrets plugins whose patterns are used, with the lower-case literals that must occur for them to run
#: (None: always run). Not used: its npm and basic-auth patterns (unbounded runs: not linear time; ctxbus's own
#: npm-token and url-password rules instead), its keyword plugin (ctxbus's keyword rule), IP addresses (no secret).
DETECT_SECRETS_PLUGINS: tuple[tuple[type[Any], tuple[str, ...] | None], ...] = (
    (AWSKeyDetector, ("a3t", "akia", "asia", "abia", "acca", "aws")),
    (ArtifactoryDetector, ("akc",)),
    (AzureStorageKeyDetector, ("accountkey=",)),
    (DiscordBotTokenDetector, (".",)),
    (GitHubTokenDetector, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (
        GitLabTokenDetector,
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "gr1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
    ),
    (JwtTokenDetector, ("eyj",)),
    (MailchimpDetector, tuple(f"-us{d}" for d in range(1, 10))),
    (OpenAIDetector, ("t3blbkfj",)),
    (PypiTokenDetector, ("pypi-",)),
    (SendGridDetector, ("sg.",)),
    (SlackDetector, ("xox", "hooks.slack")),
    (SquareOAuthDetector, ("sq0csp-",)),
    (StripeDetector, ("k_live_",)),
    (TelegramBotTokenDetector, (":",)),
    (TwilioKeyDetector, None),
)
_BOUNDARY = r"(?<![A-Za-z0-9_-])"
#: an unbounded run (``+``, ``*``, ``{n,}``): such a pattern gets the look-behind (bounded ones keep their fast
#: literal search and cost at most their bound per candidate)
_CLASS = re.compile(r"\[(?:\\.|[^\]])*\]")
_UNBOUNDED = re.compile(r"(?<!\\)[+*]|\{\d+,\}")
#: detect-secrets patterns left out: Artifactory's ``AP…`` passwords (any word starting "AP" and a hex digit: too
#: many false positives in ordinary text)
_SKIPPED = frozenset({r'(?:\s|=|:|"|^)AP[\dABCDEF][a-zA-Z0-9]{8,}(?:\s|"|$)'})


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def detect_secrets_rules() -> tuple[Rule, ...]:
    """detect-secrets' plugin patterns as rules (behind the token look-behind; see the module doc)."""
    rules: list[Rule] = []
    for plugin, needles in DETECT_SECRETS_PLUGINS:
        accept = JwtTokenDetector.is_formally_valid if plugin is JwtTokenDetector else None
        for pattern in plugin.denylist:
            if pattern.pattern in _SKIPPED:
                continue
            name = _slug(plugin.secret_type)
            group = 0
            if plugin is AWSKeyDetector and pattern.groups:  # aws.{0,20}?key.{0,20}?"<40 chars>": the value
                name, group = "aws-secret-key", 1
            unbounded = _UNBOUNDED.search(_CLASS.sub("", pattern.pattern)) is not None
            source = _BOUNDARY + "(?:" + pattern.pattern + ")" if unbounded else pattern.pattern
            compiled = re.compile(source, pattern.flags)
            rules.append(Rule(name, compiled, needles or (), group, accept, origin="detect-secrets"))
    return tuple(rules)


def _private_key_needles() -> tuple[str, ...]:
    """detect-secrets' private-key markers, lower-cased (the block itself is ctxbus's rule: it takes the body too)."""
    return (*PRIVATE_KEY.needles, *(p.pattern.lower() for p in PrivateKeyDetector.denylist))


@functools.cache
def default_redactor() -> Redactor:
    """The redactor every door uses (built once per process: about 100 ms, mostly importing detect-secrets)."""
    private_key = Rule(PRIVATE_KEY.name, PRIVATE_KEY.pattern, _private_key_needles(), PRIVATE_KEY.group)
    before = tuple(private_key if r is PRIVATE_KEY else r for r in BEFORE)
    keyword = KeywordRule(
        entropy=Base64HighEntropyString().calculate_shannon_entropy,
        base64_limit=Base64HighEntropyString().entropy_limit,
        hex_limit=HexHighEntropyString().entropy_limit,
    )
    jwt = dataclasses.replace(JWT, accept=JwtTokenDetector.is_formally_valid)
    return Redactor((*before, jwt, *TOKENS, *detect_secrets_rules(), *AFTER), keyword)


def redact_text(text: str) -> str:
    """``text`` with ``<private>`` spans and every secret the rules know replaced by ``[private]`` and
    ``[REDACTED:<kind>]`` (the rest kept as it is). The call every door makes: pure, linear time."""
    return default_redactor().redact(text)


def redact_strings(data: Any, keep: frozenset[str] = frozenset()) -> int:
    """Every string value of a JSON-like structure redacted in place (but those of keys in ``keep``); how many
    changed."""
    return default_redactor().redact_strings(data, keep)
