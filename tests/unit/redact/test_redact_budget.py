"""Redaction takes linear time: on texts built to make its patterns backtrack (a rule's own prefix repeated into
one long token, secret words without values, private-key headers never closed, nested ``<private>`` tags) and on
the suite's adversarial shapes. The scaling is a ratio between sizes (tests/unit/time_budget.py), never a
wall-clock margin; absolute costs are measured by ``ctxbus bench redact``."""

from __future__ import annotations

import pytest
from hypothesis import given

from ctxbus.redact.default import redact_text

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)

#: units that each rule's pattern starts with (or runs on), repeated to the size asked
UNITS = {
    "openai-prefix": "sk-",
    "anthropic-prefix": "sk-ant-",
    "jwt-prefix": "eyJ",
    "jwt-parts": "eyJa.",
    "github": "ghp_",
    "slack": "xoxb-1-",
    "aws": "AKIA",
    "url-userinfo": "://a:",
    "url-at": "a://b:c@",
    "assignment": "password=",
    "token-word": "token ",
    "key-colon": "api_key: ",
    "pem-open": "-----BEGIN RSA PRIVATE KEY-----\n",
    "pem-body": "-----BEGIN PRIVATE KEY-----\n" + "A" * 64 + "\n",
    "private-open": "<private>",
    "private-close": "</private>",
    "bearer": "Authorization: Bearer ",
    "basic": "Basic ",
    "telegram": "1234567890:",
    "mailchimp": "0123456789abcdef0123456789abcdef-us1",
    "curl-user": "-u a:",
    "mysql": "mysql -p",
    "stdin": "echo x | ",
    "hex": "0123456789abcdef",
    "b64": "aB3+/",
    "env-name": " FURY_PUSH=",
    "env-chain": "A=B=",
    "env-colon": '\n  "X_Y": "',
    "env-value": " K=aB3xY9zQ",
    "resend": "re_",
    "sanctum": "1|",
    "key-is": "a key is ",
}


def _maker(unit: str):  # type: ignore[no-untyped-def]
    return lambda n: (unit * (n // len(unit) + 1))[:n]


MAKERS = {**{f"repeat-{k}": _maker(v) for k, v in UNITS.items()}, **KNOWN_WORST_MAKERS}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_redaction_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: assert_within_budget(redact_text, MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_redaction_takes_any_text(text: str) -> None:
    with shapes_only():
        assert_within_budget(redact_text, text)
    out = redact_text(text)
    assert redact_text(out) == out
