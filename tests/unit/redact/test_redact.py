"""Redaction: every fake secret of tests/data/secrets.jsonl is redacted, the text around it kept; ordinary code text
(hashes, UUIDs, git SHAs, base64 of non-secrets, long identifiers, the repository's own sources and bench data) is
mostly left alone; ``<private>`` spans go, nested and unclosed ones included."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbus.redact.default import default_redactor, redact_strings, redact_text
from ctxbus.redact.engine import PRIVATE_MARK, Redactor, strip_private
from ctxbus.redact.rules import AFTER, BEFORE, TOKENS

ROOT = Path(__file__).resolve().parents[3]
SECRETS = [json.loads(line) for line in (ROOT / "tests/data/secrets.jsonl").read_text().splitlines()]


def test_the_data_holds_at_least_100_secret_shapes() -> None:
    assert len(SECRETS) >= 100
    assert len({e["kind"] for e in SECRETS}) >= 40


@pytest.mark.parametrize("entry", SECRETS, ids=[e["id"] for e in SECRETS])
def test_every_secret_is_redacted(entry: dict[str, object]) -> None:
    text = str(entry["text"])
    out = redact_text(text)
    for secret in entry["secrets"]:  # type: ignore[attr-defined]
        assert secret not in out
    assert "[REDACTED:" in out
    if not str(entry["kind"]).startswith("private-key"):  # a key block is most of its text
        assert len(out) >= len(text) // 4  # the text around the secret stays


def test_the_text_around_a_secret_stays() -> None:
    out = redact_text("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE # for the staging bucket")
    assert out == "export AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key] # for the staging bucket"
    url = redact_text("connect to postgres://app:s3cr3t-Pa55@db.internal:5432/orders now")
    assert url == "connect to postgres://app:[REDACTED:url-password]@db.internal:5432/orders now"
    header = redact_text('curl -H "Authorization: Bearer abcdef0123456789abcdef" https://api.x.io')
    assert header == 'curl -H "Authorization: Bearer [REDACTED:authorization]" https://api.x.io'


def test_redacting_twice_changes_nothing_more() -> None:
    for entry in SECRETS[:40]:
        once = redact_text(str(entry["text"]))
        assert redact_text(once) == once


ORDINARY = [
    # lockfile hashes, SHAs, UUIDs, base64 of non-secrets, long identifiers, code that names secrets
    "sha256:" + hashlib.sha256(b"left-pad").hexdigest(),
    '"integrity": "sha512-' + base64.b64encode(hashlib.sha512(b"react").digest()).decode() + '"',
    "commit " + hashlib.sha1(b"x").hexdigest() + " fixes the token refresh",
    'resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#679591c564c3bffaae8454cf0b3df370c3d6911c"',
    f"request id {uuid.UUID(int=123456789)} took 40 ms",
    # a sentence after one naming a password, whose value phrase names no made-up password
    "the password field is validated on blur. the current value is shown in the input box",
    "reset the api token from the admin page. it's currently broken on staging-2, see PR-4411",
    f"session_id: {uuid.UUID(int=987654321)}",
    "data:image/png;base64," + base64.b64encode(b"\x89PNG not a secret at all, just an image header").decode(),
    "AbstractSingletonProxyFactoryBeanConfigurationManagerImpl.getInstance()",
    "def refresh_access_token(self, token: str) -> Token:\n    return self._client.exchange(token)",
    "password = getpass.getpass()\ntoken = os.environ['GITHUB_TOKEN']\napi_key = settings.API_KEY",
    "MAX_TOKENS=4096\nTOKENIZERS_PARALLELISM=false\nAUTH_ENABLED=true",
    "password: str = Field(min_length=8)\nsecret_key: SecretStr",
    '{"token_type": "bearer", "expires_in": 3600, "scope": "read"}',
    "the tokenizer splits the prompt; an author's key insight",
    "Use `Authorization: Bearer <token>` with the token from `ctxbus hooks install`.",
    "DATABASE_URL=postgres://localhost:5432/app",
    "https://example.com/path?page=2&sort=desc",
    "git@github.com:acme/app.git",
    "numpy==2.4.6 --hash=sha256:" + hashlib.sha256(b"numpy").hexdigest(),
    # Bundler settings that are no credential, and credentials given by reference
    "BUNDLE_BUILD__NOKOGIRI=--use-system-libraries\nBUNDLE_MIRROR__RUBYGEMS__ORG=https://gems.internal.example",
    "env:\n  BUNDLE_GEM__FURY__IO: ${{ secrets.FURY_TOKEN }}\n  BUNDLE_GEMS__CONTRIBSYS__COM=$SIDEKIQ_CREDS",
    "bundle config set --local path vendor/bundle && bundle config set --global gem.fury.io $FURY_TOKEN",
    # environment variables whose values are ids, revisions, paths, options or versions, not credentials
    "GIT_SHA=" + hashlib.sha1(b"y").hexdigest() + "\nCI_COMMIT_SHA=" + hashlib.sha1(b"z").hexdigest(),
    "COMMIT=" + hashlib.sha1(b"w").hexdigest() + " make release",
    "export VERCEL_PROJECT_ID=prj_8fK2mQ9xLv4TzR7w\nREQUEST_TRACE=4bf92f3577b34da6a3ce929d0e0e4736",
    "NODE_OPTIONS=--max-old-space-size=4096 BUILD_STAMP=20261128T101500Z npm run build",
    "JAVA_HOME=/usr/lib/jvm/java-21-openjdk-amd64\nLD_LIBRARY_PATH=/usr/local/cuda-12.4/lib64",
    "    env:\n      IMAGE: ghcr.io/acme/api:1.4.2\n      RUST_LOG: info,tower_http=debug\n      TZ: Europe/Berlin",
    '"CYPRESS_BASE": "http://localhost:5173", "NEXT_TELEMETRY_DISABLED": "1"',
    "    --- FAIL: TestParseDuration/1d (0.00s)\nWARNING: DeprecatedOptionPassedToScanner",
    # keys that are no credential, a hash said in prose, and identifiers that start like a vendor's prefix
    "the cache key is 3f9a8c1e5b7d2f4a6c8e0b1d3f5a7c9e, the primary key is account_id, the sort key is createdAt",
    "pattern = re_compile_pattern(re_MULTILINE_flag); a|b|c and 1|2|3 are alternatives",
    # what follows a password word in prose and is no password: algorithms, identifiers, versions, settings
    "passwords are hashed with PBKDF2-SHA256 at 600000 iterations; password hashing: bcrypt-12 rounds",
    "the password reset_flow_v2 branch is merged; password field accepts utf-8, min-length 12",
    "password policy v2.1 needs 12 characters; see password.reset() in auth/views.py:88",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_code_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def _ordinary_texts() -> list[str]:
    package = ROOT / "services/ctxbus"  # but the redactor's own sources: its rules' examples (``user:password``)
    sources = [p for p in sorted(package.rglob("*.py")) if p.relative_to(package).parts[0] != "redact"]
    texts = [p.read_text(encoding="utf-8") for p in sources if p.name != "redact.py"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "privacy.md"]
    for path in sorted((ROOT / "services/ctxbus/bench/data").rglob("*.jsonl")):
        if "capture" in path.parts:  # the capture corpus plants secrets on purpose
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            stack: list[object] = [json.loads(line)] if line.strip() else []
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
                elif isinstance(node, str) and len(node) > 20:
                    texts.append(node)
    return texts


def test_the_false_positive_rate_on_the_repositorys_own_texts() -> None:
    """Measured and printed (docs/privacy.md): the repository's sources, docs and bench data hold no secret, so
    every text changed is a false positive. The bound is loose; the figure is the point."""
    texts = _ordinary_texts()
    redactor = default_redactor()
    changed = [t for t in texts if redactor.run(t).found]
    chars = sum(len(t) for t in texts)
    rate = len(changed) / len(texts)
    print(f"false positives: {len(changed)} of {len(texts)} texts ({rate:.4%}), {chars / 1e6:.2f} MB")
    assert len(texts) > 1000
    assert rate < 0.01


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>secret</private> b", "a [private] b"),
        ("a <private>x <private>y</private> z</private> b", "a [private] b"),
        ("a <private>never closed", "a [private]"),
        ("a </private> b", "a </private> b"),
        ("a <PRIVATE>x</Private> b <private>y</private> c", "a [private] b [private] c"),
        ("no tags here", "no tags here"),
    ],
)
def test_private_spans(text: str, expected: str) -> None:
    assert strip_private(text) == expected
    assert redact_text(text) == expected


def test_a_secret_inside_a_private_span_never_shows() -> None:
    assert redact_text("<private>ghp_" + "a1" * 18 + "</private> done") == f"{PRIVATE_MARK} done"


def test_json_like_structures_are_redacted_in_place() -> None:
    data = {"prompt": "key AKIAIOSFODNN7EXAMPLE", "tool": {"items": ["ok", "DB_PASSWORD=hunter2-x9"]}, "n": 3}
    assert redact_strings(data) == 2
    assert data == {
        "prompt": "key [REDACTED:aws-access-key]",
        "tool": {"items": ["ok", "DB_PASSWORD=[REDACTED:secret-assignment]"]},
        "n": 3,
    }


def test_kept_keys_are_left_as_they_are() -> None:
    path = "/home/u/.claude/projects/-home-u-secret/AKIAIOSFODNN7EXAMPLE.jsonl"
    data = {"transcript_path": path, "prompt": path, "tool_input": {"file_path": path}}
    assert redact_strings(data, frozenset({"transcript_path", "file_path"})) == 1
    assert data["transcript_path"] == path and data["tool_input"] == {"file_path": path}
    assert data["prompt"] != path


def test_ctxbus_own_rules_work_without_detect_secrets() -> None:
    """The pure engine with ctxbus's rules alone (what core may use): tokens detect-secrets does not know."""
    redactor = Redactor((*BEFORE, *TOKENS, *AFTER))
    out = redactor.redact("sk-ant-api03-" + "x1" * 30 + " and hf_" + "abcdEFGHijklMNOPqrstUVWXyzabcdEFGH")
    assert out == "[REDACTED:anthropic-key] and [REDACTED:huggingface-token]"


def test_rules_come_from_detect_secrets_too() -> None:
    origins = {rule.origin for rule in default_redactor().rules}
    assert origins == {"ctxbus", "detect-secrets"}
    # a Discord bot token: only detect-secrets knows the shape
    token = "M" + "a1B2c3D4e5F6g7H8i9J0k1L2" + ".Gh3kLm." + "a" * 4 + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk"
    assert redact_text(f"the bot runs as {token} here") == "the bot runs as [REDACTED:discord-bot-token] here"


@settings(max_examples=60, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([str(e["text"]) for e in SECRETS]),
            st.sampled_from(ORDINARY),
            st.text(max_size=40),
            st.sampled_from(["<private>", "</private>", "password", "token:", "Bearer", "AKIA", "-----BEGIN"]),
        ),
        max_size=8,
    )
)
def test_a_structure_is_redacted_as_its_strings_are_one_by_one(values: list[str]) -> None:
    """redact_strings redacts the strings joined first, then one by one only when that finds something: the
    result is always what redacting each on its own gives."""
    data = {"items": [{"text": v} for v in values], "tail": list(values)}
    redact_strings(data)
    expected = [redact_text(v) if len(v) >= 6 else v for v in values]
    assert [i["text"] for i in data["items"]] == expected
    assert data["tail"] == expected


def test_a_letters_only_token_is_a_secret_but_a_name_is_not() -> None:
    """Found on the capture corpus (an Airflow connection's ``extra``): random letters under a token name are a
    secret though they hold no digit; CamelCase and snake_case names under secret names stay."""
    assert redact_text('{"token": "KxVbGqTmRdNpLsHwYcZuAeFjOiMvBnCt"}') == '{"token": "[REDACTED:secret-assignment]"}'
    for name in ('{"key": "user_id"}', 'SECRET_ENV = "CTXBUS_GATEWAY_SECRET"', '"password": "getHTTPResponse"'):
        assert redact_text(name) == name
