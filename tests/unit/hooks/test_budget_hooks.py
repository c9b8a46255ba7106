"""The hook side on adversarial input (the lean client's parsing, project identity, the request it makes,
the pattern-file fallback): within the time budget, whatever the bytes."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given

from ctxbus.hooks import client, transport
from ctxbus.hooks.client import session_of
from ctxbus.hooks.fallback import inject
from ctxbus.hooks.project import normalise_remote, origin_remote, project_for
from ctxbus.hooks.requests import hook_output, request_for
from ctxbus.settings import HookSettings

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)

SETTINGS = HookSettings()


def hook_bytes(text: str) -> bytes:
    body = {"hook_event_name": "UserPromptSubmit", "session_id": text[:1_000], "cwd": text[:500], "prompt": text}
    return json.dumps(body).encode("utf-8")


def client_side(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    for data in (hook_bytes(text), raw):
        with contextlib.suppress(ValueError):
            client.read_input(data)
        client.request_body(data, "UserPromptSubmit")
    with contextlib.suppress(ValueError):
        transport.runtime_gateway_port(text)
    with contextlib.suppress(ValueError):
        transport.tcp_address({"CTXBUS_GATEWAY_URL": text}, "/nonexistent")
    client.output_for("UserPromptSubmit", text)


def gateway_side(text: str) -> None:
    hook_input = json.loads(hook_bytes(text))
    request_for(hook_input, SETTINGS)
    session_of(hook_input)
    hook_output("UserPromptSubmit", text, SETTINGS.max_chars)
    normalise_remote(text)


PATTERNS_FILE = ".claude/learned_patterns.json"


def check(text: str, tmp_path: Path) -> None:
    assert_within_budget(client_side, text)
    assert_within_budget(gateway_side, text, expect=(ValueError,))  # HookInputError, or a lone surrogate refused
    git = tmp_path / ".git"
    git.mkdir(exist_ok=True)
    (git / "config").write_text(f'[remote "origin"]\n\turl = {text}\n{text}', encoding="utf-8", errors="surrogatepass")
    assert_within_budget(origin_remote, str(tmp_path))
    patterns = tmp_path / PATTERNS_FILE
    patterns.parent.mkdir(exist_ok=True)
    patterns.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_within_budget(
        inject, {}, project_root=tmp_path, patterns_file=".claude/learned_patterns.json", home=tmp_path
    )
    document = {"patterns": [{"pattern_id": text[:100], "description": text, "domain": text[:50], "confidence": 1}]}
    patterns.write_text(json.dumps(document), encoding="utf-8")
    assert_within_budget(
        inject, {}, project_root=tmp_path, patterns_file=".claude/learned_patterns.json", home=tmp_path
    )


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str, tmp_path: Path) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n), tmp_path))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_hook_parsing_takes_any_text(text: str) -> None:

    with tempfile.TemporaryDirectory() as tmp, shapes_only():
        check(text, Path(tmp))


def test_a_git_config_that_is_not_utf8_does_not_break_project_identity(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_bytes(b'[remote "origin"]\n\turl = git@github.com:acme/web.git\n\xed\xa0\x80\n')
    assert project_for(str(root), env={}) == "github.com/acme/web"
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_bytes(b"gitdir: \xff\xfe/nowhere\n")
    assert project_for(str(worktree), env={}) == str(worktree)
