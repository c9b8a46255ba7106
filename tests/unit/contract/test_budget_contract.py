"""The wire format on adversarial input: validating, encoding and decoding a request whose prompt is
100,000 characters of adversarial text, and decoding adversarial bytes, stay within the time budget."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger
from ctxbus.contract.serde import EventDecodeError, EventDeserializer, EventSerializer, frame, header_value

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
)

ser = EventSerializer()
de = EventDeserializer()


def round_trip(text: str) -> None:
    clean = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot be encoded (a hook replaces it)
    payload = RetrievalRequested(
        agent_name="a", prompt=clean, trigger=Trigger.USER_PROMPT, mentioned_files=(clean[:1_000],), domain=clean[:200]
    )
    event = Envelope.root(payload, project="p", session_id=clean[:500] or "s", producer="test")
    de(ser(event))


def decode_garbage(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    schema_id = ser.schema_id("context.retrieval.requested")
    for data in (raw, frame(schema_id, raw), frame(schema_id, ser_prefix() + raw)):
        with contextlib.suppress(EventDecodeError):
            de(data)
    header_value([("h", raw)] * 10, "h")


def ser_prefix() -> bytes:
    payload = RetrievalRequested(agent_name="a", prompt="p", trigger=Trigger.USER_PROMPT)
    return ser(Envelope.root(payload, project="p", session_id="s", producer="t"))[5:60]


def check(text: str) -> None:
    assert_within_budget(round_trip, text, expect=(ValueError,))
    assert_within_budget(decode_garbage, text)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_the_wire_format_takes_any_text(text: str) -> None:
    with shapes_only():
        check(text)
