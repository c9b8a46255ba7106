"""ctxbus's own secret rules: the shapes detect-secrets misses or matches in a way that is not linear time.

Each rule is a :class:`~ctxbus.core.redact.Rule`; :mod:`ctxbus.redaction` puts them around detect-secrets' own
(private keys and authorization headers first, so their bodies are taken whole; the keyword rule last). Every
long run is preceded by a look-behind on its own characters (``(?<![…])``): a run of a pattern's characters is
scanned once, from its start, never again from each position inside it.
"""

from __future__ import annotations

import base64
import binascii
import re

from ctxbus.core.redact import Rule

_B = r"(?<![A-Za-z0-9_-])"  # a token starts here (not inside a longer one)
_T = "[A-Za-z0-9_-]"


def _rule(name: str, pattern: str, needles: tuple[str, ...], group: int | str = 0, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags), needles, group)


def _basic_credentials(value: str) -> bool:
    """A ``Basic`` value is base64 of ``user:password``."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "key", "sso-key", "otp", "negotiate", "ntlm"})


def _credential(value: str) -> bool:
    """A header's value is a credential, not its scheme or a placeholder: a digit in it, or 20 characters."""
    return value.lower() not in _SCHEMES and (any(c.isdigit() for c in value) or len(value) >= 20)


#: PEM and OpenSSH private keys (JSON-escaped newlines included); an unclosed block runs to the end of its body
PRIVATE_KEY = _rule(
    "private-key",
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)|(?:[A-Za-z0-9+/=:,\t\r\n]|\\[nrt]|-(?!----)|(?<=:) )++"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?)",
    ("private key",),
)
PUTTY_KEY = _rule(
    "private-key",
    r"PuTTY-User-Key-File-[23]:[^\n]{0,200}(?:\n[A-Za-z-]{1,40}:[^\n]{0,2000}){0,60}",
    ("putty-user-key-file",),
)
#: ``Authorization: Bearer …`` / ``Basic …`` / ``token …`` (the scheme is kept)
AUTHORIZATION = Rule(
    "authorization",
    re.compile(
        r"(?i)(?<![a-z-])(?:proxy-)?authorization\\?[\"']?\s{0,4}[:=]\s{0,4}\\?[\"']?"
        r"(?:(?:bearer|basic|token|digest|apikey|key|sso-key|otp)\s{1,4})?(?P<s>(?<![A-Za-z0-9+/=_.~:-])[A-Za-z0-9+/=_.~:-]{6,4096})"
    ),
    ("authorization",),
    "s",
    _credential,
)
BEARER = Rule(
    "bearer-token",
    re.compile(r"(?i)(?<![a-z])bearer\s{1,4}(?P<s>(?<![A-Za-z0-9+/=_.~-])[A-Za-z0-9+/=_.~-]{16,4096})"),
    ("bearer",),
    "s",
    _credential,
)
BASIC = Rule(
    "basic-auth",
    re.compile(r"(?i)(?<![a-z])basic\s{1,4}(?P<s>(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{8,4096}={0,2})(?![A-Za-z0-9+/=])"),
    ("basic",),
    "s",
    _basic_credentials,
)
#: ``scheme://user:password@host``: the password goes, the user and host stay
URL_PASSWORD = _rule(
    "url-password",
    r"(?<=://)[^\s:/@\"'<>]{0,256}:(?P<s>[^\s@/\"'<>]{1,256})@",
    ("://",),
    "s",
)
#: a key as the whole user part (Sentry DSNs: ``https://<32 hex>@o1.ingest.sentry.io/2``)
URL_KEY_USER = _rule("url-key", r"(?<=://)(?P<s>[a-f0-9]{32})(?::[a-f0-9]{0,64})?@", ("://",), "s")
#: ``curl -u user:password``, ``--user user:password``
CURL_USER = _rule(
    "curl-password",
    r"(?<!\S)(?:-u|--user|--proxy-user)[ =]{1,4}[\"']?[^\s:\"']{1,128}:(?P<s>[^\s\"']{1,256})",
    ("-u", "--user"),
    "s",
)
#: ``mysql -u root -pPASSWORD``
MYSQL_P = _rule(
    "mysql-password",
    r"(?<![a-z])mysql(?:dump|admin)?\b[^\n]{0,200}?\s-p(?P<s>[^\s'\"-][^\s'\"]{2,128})",
    ("mysql",),
    "s",
)
#: ``docker login -p PASSWORD``, ``helm registry login -p …``
LOGIN_P = _rule(
    "login-password",
    r"(?<![a-z])(?:docker|podman|helm|oras|nerdctl)\s{1,4}(?:registry\s{1,4})?login\b"
    r"[^\n|&;]{0,200}?\s(?:-p|--password)[ =]{1,4}"
    r"[\"']?(?P<s>[^\s'\"]{3,256})",
    ("login",),
    "s",
)
#: ``echo "PASSWORD" | docker login --password-stdin``
STDIN_PASSWORD = _rule(
    "stdin-password",
    r"(?<![A-Za-z])(?:echo|printf)\s{1,4}(?:-n\s{1,4})?[\"']?(?P<s>[^\s\"'|]{3,256})[\"']?\s{0,4}\|[^\n|]{0,200}?--password-stdin",
    ("--password-stdin",),
    "s",
)

#: a JSON Web Token, signature included (detect-secrets' own pattern stops before it); the default redactor
#: checks it with detect-secrets' JWT validator (its parts decode, the first two as JSON)
JWT = _rule(
    "json-web-token",
    _B + r"eyJ[A-Za-z0-9_-]{5,4096}={0,2}\.[A-Za-z0-9_-]{2,8192}={0,2}(?:\.[A-Za-z0-9_\-+/=]{0,4096})?",
    ("eyj",),
)
TOKENS: tuple[Rule, ...] = (
    _rule("github-token", _B + r"github_pat_[A-Za-z0-9_]{22,255}", ("github_pat_",)),
    _rule("github-token", _B + r"gh[pousr]_[A-Za-z0-9]{30,255}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _rule("anthropic-key", _B + r"sk-ant-" + _T + "{20,255}", ("sk-ant-",)),
    _rule("openai-key", _B + r"sk-(?:proj|svcacct|admin|None)-" + _T + "{20,255}", ("sk-",)),
    _rule("openai-key", _B + r"sk-[A-Za-z0-9]{32,255}(?!" + _T + ")", ("sk-",)),
    _rule("stripe-key", _B + r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,255}", ("k_live_", "k_test_")),
    _rule("stripe-key", _B + r"whsec_[0-9a-zA-Z]{24,255}", ("whsec_",)),
    _rule("slack-token", _B + r"xox[abposre]-[0-9A-Za-z-]{10,255}", ("xox",)),
    _rule("slack-token", _B + r"xapp-\d-[A-Z0-9]{6,20}-\d{6,20}-[a-z0-9]{32,128}", ("xapp-",)),
    _rule("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,255}", ("hooks.slack",)),
    _rule("google-api-key", _B + r"AIza[0-9A-Za-z_-]{35}", ("aiza",)),
    _rule("google-oauth-token", _B + r"ya29\.[0-9A-Za-z_-]{20,2048}", ("ya29.",)),
    _rule("google-oauth-secret", _B + r"GOCSPX-[0-9A-Za-z_-]{28}", ("gocspx-",)),
    _rule("npm-token", _B + r"npm_[A-Za-z0-9]{36}", ("npm_",)),
    _rule("pypi-token", _B + r"pypi-AgE[A-Za-z0-9_-]{50,1024}", ("pypi-age",)),
    _rule("huggingface-token", _B + r"hf_[A-Za-z]{34}(?![A-Za-z0-9])", ("hf_",)),
    _rule("twilio-key", _B + r"SK[0-9a-f]{32}(?![0-9a-f])", ("sk",)),
    _rule("sendgrid-key", _B + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", ("sg.",)),
    _rule("mailgun-key", _B + r"key-[0-9a-z]{32}(?![0-9a-z])", ("key-",)),
    _rule("digitalocean-token", _B + r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",)),
    _rule("shopify-token", _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",)),
    _rule("databricks-token", _B + r"dapi[a-f0-9]{32}(?:-\d)?", ("dapi",)),
    _rule("gitlab-token", _B + r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|oas)-[A-Za-z0-9_-]{20,255}", ("gl",)),
    _rule("vault-token", _B + r"hv[sbr]\.[A-Za-z0-9_-]{24,255}", ("hvs.", "hvb.", "hvr.")),
    _rule("grafana-token", _B + r"(?:glsa|glc)_[A-Za-z0-9_=+/-]{32,255}", ("glsa_", "glc_")),
    _rule("postman-key", _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("pmak-",)),
    _rule("linear-key", _B + r"lin_api_[A-Za-z0-9]{40}", ("lin_api_",)),
    _rule("doppler-token", _B + r"dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_]{1,20}\.)?[A-Za-z0-9]{40,44}", ("dp.",)),
    _rule("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("age-secret-key-1",)),
    _rule(
        "aws-access-key",
        _B + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])",
        ("a",),
    ),
    _rule("azure-storage-key", r"AccountKey=(?P<s>[A-Za-z0-9+/=]{40,120})", ("accountkey=",), "s"),
    _rule("azure-sas", r"(?<=[?&])sig=(?P<s>[A-Za-z0-9%+/=]{20,255})", ("sig=",), "s"),
)
#: what runs before the token rules (whole blocks and headers) and after them (URLs, command lines)
BEFORE: tuple[Rule, ...] = (PRIVATE_KEY, PUTTY_KEY, AUTHORIZATION, BEARER, BASIC)
AFTER: tuple[Rule, ...] = (URL_PASSWORD, URL_KEY_USER, CURL_USER, MYSQL_P, LOGIN_P, STDIN_PASSWORD)
