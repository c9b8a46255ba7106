"""The admission checks, the caller's identity, the body cleaning and the client's trimming on adversarial text:
within the request path's time budget (issue 10), whatever the bytes."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given

from ctxbus.core.hosts import split_host
from ctxbus.gateway.admission import Admission, presented_secret
from ctxbus.gateway.hook_input import clean_strings, event_of, parse_object
from ctxbus.gateway.http import HttpError, Request
from ctxbus.gateway.identity import identify
from ctxbus.hooks import oversize
from ctxbus.hooks.project import shorten_project
from ctxbus.hooks.wire import CWD_HEADER, MAX_HEADER_VALUE, PROJECT_HEADER, encode_value

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)

GATE = Admission("s" * 43, port=9470, allowed_hosts=["127.0.0.1:19470"])


def admission_side(text: str) -> None:
    head = text[:8_000]
    for headers in (
        {"host": head, "authorization": f"Bearer {head}"},
        {"host": "127.0.0.1:9470", "authorization": head, "x-ctxbus-token": head},
        {"host": "127.0.0.1:9470", "origin": head},
    ):
        with contextlib.suppress(HttpError):
            GATE.check(Request("POST", "/v1/hooks", headers, b""))
        presented_secret(headers)
    split_host(text)


def bodies(text: str) -> list[bytes]:
    raw = text.encode("utf-8", "surrogatepass")
    return [b'{"prompt": "' + raw + b'", "cwd": "/x"}', raw, json.dumps({"prompt": text, "n": [text[:1_000]]}).encode()]


def body_side(body: bytes) -> None:
    with contextlib.suppress(HttpError):
        data = parse_object(body, "hook input")
        clean_strings(data)
        event_of(data, "UserPromptSubmit")


def name_side(text: str) -> None:
    shorten_project(text)
    encode_value(text[:MAX_HEADER_VALUE])  # the client encodes its own cwd (at most this) and a shortened project


def identity_side(text: str) -> None:
    headers = {PROJECT_HEADER: encode_value(text[:4_000]), CWD_HEADER: encode_value("/" + text[:4_000])}
    identify({"cwd": "relative " + text}, headers)


def cut_inputs(text: str) -> list[bytes]:
    raw = json.dumps({"session_id": "s", "cwd": "/w", "prompt": text}).encode("utf-8", "surrogatepass")
    return [raw, raw[: len(raw) // 2], raw[:-3]]


def trimming_side(raw: bytes) -> None:
    with contextlib.suppress(oversize.InputError):
        data = oversize.parse(raw, cut=True)
        oversize.trim_prompt(data)


def check(text: str) -> None:
    assert_within_budget(admission_side, text)
    for body in bodies(text):
        assert_within_budget(body_side, body)
    assert_within_budget(name_side, text)
    assert_within_budget(identity_side, text)
    for raw in cut_inputs(text):
        assert_within_budget(trimming_side, raw)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str, tmp_path: Path) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_adversarial_text_is_admitted_or_refused(text: str) -> None:
    with shapes_only():
        check(text)
