"""Round trips, framing, headers and poison classification of the wire format."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pytest

from ctxbus.contract.envelope import AnyEnvelope, Envelope, EventType
from ctxbus.contract.payloads import DeadLetter, MemoryUpserted, RetrievalRequested
from ctxbus.contract.serde import (
    HEADER_CORRELATION_ID,
    HEADER_EVENT_TYPE,
    EventDecodeError,
    EventDeserializer,
    EventSerializer,
    InvalidEvent,
    OversizeEvent,
    UnexpectedEventType,
    UnknownSchemaId,
    decode_dead_letter,
    encode_dead_letter,
    event_headers,
    header_value,
    to_record,
    unframe,
)
from ctxbus.memory.model import Feedback, MemoryItem

ser = EventSerializer()
de = EventDeserializer()


@pytest.mark.parametrize("name", ["request_event", "completed_event", "injected_event", "curated_event"])
def test_every_event_type_round_trips(name: str, request: pytest.FixtureRequest) -> None:
    event: AnyEnvelope = request.getfixturevalue(name)
    data = ser(event)
    assert data[0] == 0
    schema_id = struct.unpack(">I", data[1:5])[0]
    assert schema_id == ser.schema_id(event.event_type)
    decoded = de(data)
    assert decoded == event
    assert decoded.emitted_at.tzinfo is not None


def test_headers_mirror_the_envelope(request_event: Envelope[RetrievalRequested]) -> None:
    headers = event_headers(request_event, 1)
    assert header_value(headers, HEADER_EVENT_TYPE) == EventType.RETRIEVAL_REQUESTED
    assert header_value(headers, HEADER_CORRELATION_ID) == str(request_event.correlation_id)
    assert header_value(headers, "ctxbus-schema-version") == str(request_event.schema_version)


@pytest.mark.parametrize(
    ("data", "error", "reason"),
    [
        (b"", EventDecodeError, "undecodable"),
        (b"garbage bytes", EventDecodeError, "undecodable"),
        (b"\x00\x00\x00\x03\xe7rest", UnknownSchemaId, "unknown_schema_id"),
        (b"\x00\x00\x00\x00\x01\xff\xff\xff", EventDecodeError, "undecodable"),
    ],
)
def test_poison_bytes_are_classified(data: bytes, error: type[EventDecodeError], reason: str) -> None:
    with pytest.raises(error) as info:
        de(data)
    assert info.value.reason == reason


def test_truncated_body_is_undecodable(request_event: Envelope[RetrievalRequested]) -> None:
    data = ser(request_event)
    with pytest.raises(EventDecodeError):
        de(data[: len(data) // 2])


def test_trailing_garbage_is_undecodable(request_event: Envelope[RetrievalRequested]) -> None:
    with pytest.raises(EventDecodeError, match="trailing"):
        de(ser(request_event) + b"xx")


def test_payload_breaking_bounds_is_invalid(request_event: Envelope[RetrievalRequested]) -> None:
    # Avro has no bounds: write a record pydantic would refuse (max_items 0), straight through fastavro.
    import io

    import fastavro

    from ctxbus.contract.registry import default_registry
    from ctxbus.contract.serde import frame

    record = to_record(request_event)
    record["payload"]["max_items"] = 0
    entry = default_registry().current(EventType.RETRIEVAL_REQUESTED)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, entry.schema, record)
    with pytest.raises(InvalidEvent, match="max_items"):
        de(frame(entry.schema_id, buf.getvalue()))


def test_oversize_event_is_refused(request_event: Envelope[RetrievalRequested]) -> None:
    small = EventDeserializer(max_bytes=50)
    with pytest.raises(OversizeEvent):
        small(ser(request_event))


def test_unexpected_event_type_on_a_topic(injected_event: AnyEnvelope) -> None:
    with pytest.raises(UnexpectedEventType):
        de(ser(injected_event), expect=EventType.RETRIEVAL_REQUESTED)


def test_tombstone_is_undecodable() -> None:
    with pytest.raises(EventDecodeError, match="tombstone"):
        de(None)


def test_unframe_rejects_wrong_magic() -> None:
    with pytest.raises(EventDecodeError, match="magic"):
        unframe(b"\x01\x00\x00\x00\x01")


def test_dead_letter_record_round_trips() -> None:
    record = DeadLetter(
        original_topic="t",
        original_partition=2,
        original_offset=41,
        consumer_group="g",
        error_class="InvalidEvent",
        error_message="validation_failed: payload.max_items",
        failed_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert decode_dead_letter(encode_dead_letter(record)) == record


def test_store_side_item_fields_never_travel() -> None:
    item = MemoryItem(
        id="m", project="p", kind="pattern", content="x", cluster_id="forged", feedback=Feedback(uses=9, successes=9)
    )
    event = Envelope.root(MemoryUpserted(items=(item,)), project="p", session_id="s", producer="test")
    (decoded,) = de(ser(event)).payload.items  # type: ignore[union-attr]
    assert decoded.cluster_id is None and decoded.feedback == Feedback()
    assert decoded.model_dump(exclude={"cluster_id", "feedback"}) == item.model_dump(exclude={"cluster_id", "feedback"})


def test_the_publishers_scrub_redacts_the_payload_and_never_the_envelope(
    request_event: Envelope[RetrievalRequested],
) -> None:
    from ctxbus.redact.default import redact_strings

    secret = "ghp_" + "a1B2" * 9
    event = request_event.model_copy(
        update={
            "payload": request_event.payload.model_copy(update={"prompt": f"push with {secret} <private>x</private>"})
        }
    )
    decoded = EventDeserializer()(EventSerializer(scrub=redact_strings)(event))
    assert decoded.payload.prompt == "push with [REDACTED:github-token] [private]"  # type: ignore[union-attr]
    assert decoded.model_dump(exclude={"payload"}) == event.model_dump(exclude={"payload"})
    assert secret.encode() not in EventSerializer(scrub=redact_strings)(event)
    assert secret.encode() in EventSerializer()(event)  # no scrub: as it was


def test_the_publisher_keeps_ids_as_they_are() -> None:
    from ctxbus.adapters.kafka.publisher import scrub_payload

    payload = {"task_id": "AKIAIOSFODNN7EXAMPLE", "validation_errors": ["key AKIAIOSFODNN7EXAMPLE refused"]}
    scrub_payload(payload)
    assert payload == {
        "task_id": "AKIAIOSFODNN7EXAMPLE",
        "validation_errors": ["key [REDACTED:aws-access-key] refused"],
    }
