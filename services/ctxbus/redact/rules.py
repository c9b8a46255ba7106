"""ctxbus's own secret rules: the shapes detect-secrets misses or matches in a way that is not linear time.

Each rule is a :class:`~ctxbus.redact.engine.Rule`; :mod:`ctxbus.redact.default` puts them around detect-secrets' own
(private keys and authorization headers first, so their bodies are taken whole; the keyword rule last). Every
long run is preceded by a look-behind on its own characters (``(?<![…])``): a run of a pattern's characters is
scanned once, from its start, never again from each position inside it.
"""

from __future__ import annotations

import base64
import binascii
import re

from ctxbus.redact.engine import Rule

_T = "[A-Za-z0-9_-]"


def _tok(literal: str) -> str:
    """``literal`` (a fixed-width pattern) where a token starts: not inside a longer token. The look-behind comes
    after the literal, so the regex engine still finds candidates with its fast literal search."""
    return f"(?:{literal})(?<!{_T}(?:{literal}))"


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
    re.compile(
        r"(?:Basic|basic|BASIC)(?<![A-Za-z]....[Cc])\s{1,4}(?P<s>(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{8,4096}={0,2})(?![A-Za-z0-9+/=])"
    ),
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
    r"-(?:u(?<!\S-u)|-user(?<!\S--user)|-proxy-user(?<!\S--proxy-user))[ =]{1,4}"
    r"[\"']?[^\s:\"']{1,128}:(?P<s>[^\s\"']{1,256})",
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

#: a password in plain text where it becomes a secure one: PowerShell's ``ConvertTo-SecureString 'p@ss' -AsPlainText``
SECURE_STRING = _rule(
    "plaintext-password",
    r"(?i)convertto-securestring\s{1,4}(?:-string\s{1,4})?(?P<q>['\"])(?P<s>[^'\"\n]{1,256})(?P=q)",
    ("convertto-securestring",),
    "s",
)

#: a JSON Web Token, signature included (detect-secrets' own pattern stops before it); the default redactor
#: checks it with detect-secrets' JWT validator (its parts decode, the first two as JSON)
JWT = _rule(
    "json-web-token",
    _tok(r"eyJ") + r"[A-Za-z0-9_-]{5,4096}={0,2}\.[A-Za-z0-9_-]{2,8192}={0,2}(?:\.[A-Za-z0-9_\-+/=]{0,4096})?",
    ("eyj",),
)
#: Bundler's credentials for a gem source, by host: ``BUNDLE_GEM__FURY__IO=…`` (``__`` for a dot, ``___`` for a
#: hyphen; in an environment, a YAML ``env:`` or a ``.bundle/config``) and ``bundle config [set] [--global] HOST
#: CREDENTIALS``. Not the host-keyed settings that hold none (``BUILD__``, ``MIRROR__``, ``local.``), nor a value
#: that is a reference (``$FURY_TOKEN``, ``${{ secrets.X }}``), an option or a path.
_BUNDLER_VALUE = r"[ \t]*[\"']?(?P<s>[^\s\"'$<{\-/~.][^\s\"']{5,511})"
BUNDLER_ENV = _rule(
    "bundler-credential",
    r"(?<![A-Za-z0-9_])BUNDLE_(?!BUILD__|MIRROR__)[A-Z0-9_]*[A-Z0-9]__[A-Z0-9_]*[A-Z0-9][ \t]*[=:]" + _BUNDLER_VALUE,
    ("bundle_",),
    "s",
)
BUNDLER_CONFIG = _rule(
    "bundler-credential",
    r"\bbundle config (?:set )?(?:--(?:global|local) )?(?!local\.|build\.|mirror\.)(?:https?://)?"
    r"[a-z0-9-]+(?:\.[a-z0-9-]+)+/?[ \t]" + _BUNDLER_VALUE,
    ("bundle config",),
    "s",
)


def _mixed(value: str) -> bool:
    """Random token characters: a capital, a small letter and a digit (``re_Kq7T…``, not ``re_compile_pattern``)."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


#: Resend API keys (``re_`` and 20-64 random characters; an identifier such as ``re_compile`` has no capital or digit)
RESEND_KEY = Rule("resend-key", re.compile(_tok(r"re_") + r"[A-Za-z0-9_]{20,64}(?![A-Za-z0-9_])"), ("re_",), 0, _mixed)
#: Laravel Sanctum personal access tokens as ``createToken()->plainTextToken`` gives them: the token's id, ``|``, and
#: 40 random characters (Sanctum 4: an optional prefix before them, a CRC32 after)
SANCTUM_TOKEN = Rule(
    "laravel-sanctum-token",
    # (the bar first, a digit of the id checked behind it: a scan from every digit cost 1.3 ms per 100 KB of code;
    # the id stays, the random part goes)
    re.compile(r"\|(?<=[0-9]\|)[A-Za-z0-9_]{40,80}(?![A-Za-z0-9_])"),
    ("|",),
    0,
    _mixed,
)
TOKENS: tuple[Rule, ...] = (
    _rule("github-token", _tok(r"github_pat_") + r"[A-Za-z0-9_]{22,255}", ("github_pat_",)),
    _rule("github-token", _tok(r"gh[pousr]_") + r"[A-Za-z0-9]{30,255}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _rule("anthropic-key", _tok(r"sk-ant-") + r"" + _T + "{20,255}", ("sk-ant-",)),
    _rule("openai-key", _tok(r"sk-") + r"(?:proj|svcacct|admin|None)-" + _T + "{20,255}", ("sk-",)),
    _rule("openai-key", _tok(r"sk-") + r"[A-Za-z0-9]{32,255}(?!" + _T + ")", ("sk-",)),
    _rule("stripe-key", _tok(r"[sr]k_(?:live|test)_") + r"[0-9a-zA-Z]{16,255}", ("k_live_", "k_test_")),
    _rule("stripe-key", _tok(r"whsec_") + r"[0-9a-zA-Z]{24,255}", ("whsec_",)),
    _rule("slack-token", _tok(r"xox[abposre]-") + r"[0-9A-Za-z-]{10,255}", ("xox",)),
    _rule("slack-token", _tok(r"xapp-") + r"\d-[A-Z0-9]{6,20}-\d{6,20}-[a-z0-9]{32,128}", ("xapp-",)),
    _rule("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,255}", ("hooks.slack",)),
    _rule("google-api-key", _tok(r"AIza") + r"[0-9A-Za-z_-]{35}", ("aiza",)),
    _rule("google-oauth-token", _tok(r"ya29") + r"\.[0-9A-Za-z_-]{20,2048}", ("ya29.",)),
    _rule("google-oauth-secret", _tok(r"GOCSPX-") + r"[0-9A-Za-z_-]{28}", ("gocspx-",)),
    _rule("npm-token", _tok(r"npm_") + r"[A-Za-z0-9]{36}", ("npm_",)),
    _rule("rubygems-key", _tok(r"rubygems_") + r"[0-9a-f]{48}(?![0-9a-f])", ("rubygems_",)),
    BUNDLER_ENV,
    BUNDLER_CONFIG,
    RESEND_KEY,
    SANCTUM_TOKEN,
    _rule("pypi-token", _tok(r"pypi-AgE") + r"[A-Za-z0-9_-]{50,1024}", ("pypi-age",)),
    _rule("huggingface-token", _tok(r"hf_") + r"[A-Za-z]{34}(?![A-Za-z0-9])", ("hf_",)),
    _rule("twilio-key", _tok(r"SK") + r"[0-9a-f]{32}(?![0-9a-f])", ("sk",)),
    _rule("sendgrid-key", _tok(r"SG") + r"\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}", ("sg.",)),
    _rule("mailgun-key", _tok(r"key-") + r"[0-9a-z]{32}(?![0-9a-z])", ("key-",)),
    _rule("digitalocean-token", _tok(r"do[opr]_v1_") + r"[a-f0-9]{64}", ("_v1_",)),
    _rule("shopify-token", _tok(r"shp(?:at|ca|pa|ss)_") + r"[a-fA-F0-9]{32}", ("shp",)),
    _rule("databricks-token", _tok(r"dapi") + r"[a-f0-9]{32}(?:-\d)?", ("dapi",)),
    _rule("gitlab-token", _tok(r"gl") + r"(?:pat|dt|ft|rt|oas|ptt|imt|cbt|soat)-[A-Za-z0-9_-]{20,255}", ("gl",)),
    _rule("vault-token", _tok(r"hv[sbr]\.") + r"[A-Za-z0-9_-]{24,255}", ("hvs.", "hvb.", "hvr.")),
    _rule("grafana-token", _tok(r"gl") + r"(?:sa|c)_[A-Za-z0-9_=+/-]{32,255}", ("glsa_", "glc_")),
    _rule("postman-key", _tok(r"PMAK-") + r"[a-f0-9]{24}-[a-f0-9]{34}", ("pmak-",)),
    _rule("linear-key", _tok(r"lin_api_") + r"[A-Za-z0-9]{40}", ("lin_api_",)),
    _rule(
        "doppler-token",
        _tok(r"dp") + r"\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_]{1,20}\.)?[A-Za-z0-9]{40,44}",
        ("dp.",),
    ),
    _rule("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("age-secret-key-1",)),
    _rule(
        "aws-access-key",
        _tok(r"A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA") + r"[A-Z0-9]{16}(?![A-Z0-9])",
        ("a3t", "akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "aipa", "anpa", "anva"),
    ),
    _rule("azure-storage-key", r"AccountKey=(?P<s>[A-Za-z0-9+/=]{40,120})", ("accountkey=",), "s"),
    _rule("azure-sas", r"(?<=[?&])sig=(?P<s>[A-Za-z0-9%+/=]{20,255})", ("sig=",), "s"),
)
#: what runs before the token rules (whole blocks and headers) and after them (URLs, command lines)
BEFORE: tuple[Rule, ...] = (PRIVATE_KEY, PUTTY_KEY, AUTHORIZATION, BEARER, BASIC)
AFTER: tuple[Rule, ...] = (URL_PASSWORD, URL_KEY_USER, CURL_USER, MYSQL_P, LOGIN_P, STDIN_PASSWORD, SECURE_STRING)
