"""The gateway's HTTP parsing on adversarial bytes: within the time budget, a clear error or a request."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given

from ctxbus.contract.topics import Topics
from ctxbus.gateway.http import HttpError, Request, read_request
from ctxbus.gateway.library import LibraryRoutes
from ctxbus.gateway.service import HookGateway
from ctxbus.observability import Metrics
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

MAX_BODY = 8_000_000


def parse(data: bytes) -> None:
    async def run() -> None:
        reader = asyncio.StreamReader(limit=2**20)
        reader.feed_data(data)
        reader.feed_eof()
        await read_request(reader, MAX_BODY)

    asyncio.run(run())


def requests_of(text: str) -> list[bytes]:
    raw = text.encode("utf-8", "surrogatepass")
    body = b'{"prompt": "' + raw + b'"}'
    return [
        b"POST /v1/hooks HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        b"POST /v1/hooks?" + raw[:8_000] + b" HTTP/1.1\r\nX-A: " + raw[:8_000] + b"\r\n\r\n",
        raw[:16_000] + b"\r\n\r\n",
        raw,
    ]


ERRORS = (HttpError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


def check(text: str) -> None:
    for data in requests_of(text):
        assert_within_budget(parse, data, expect=ERRORS)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_parsing_takes_any_bytes(text: str) -> None:
    with shapes_only():
        check(text)


@pytest.mark.parametrize("path", ["/v1/hooks", "/v1/search", "/v1/prime"])
def test_deeply_nested_json_is_a_clear_400(path: str) -> None:
    gateway = HookGateway(HookSettings(), Topics("t"), None, None, Metrics(), LibraryRoutes(lambda: None))  # type: ignore[arg-type]
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(HttpError) as refused:
        asyncio.run(gateway.handle(Request("POST", path, {}, body)))
    assert refused.value.status == 400 and "nested too deeply" in str(refused.value)
