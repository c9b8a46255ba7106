"""The poison corpus: every kind of bad record ctxbus has met, and what its dead letter must say.

Each case is a record as any client could write it onto a consumed topic (value, key, headers) with the
reason slug and error class its dead letter carries, and whether the dead letter is the truncated form
(the original is too large to republish whole under the 1 MiB producer limit). The large values are
deterministic pseudo-random bytes, so a test can recompute their sha256. Shipped (not only a test
fixture) because ``ctxbus bench chaos`` produces it onto running services too.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field

import fastavro

from ctxbus.contract.envelope import Envelope, EventType
from ctxbus.contract.payloads import ContextInjected, ContextSource, RetrievalRequested, Trigger
from ctxbus.contract.registry import default_registry
from ctxbus.contract.serde import EventSerializer, frame, to_record

MIB = 1_048_576


@dataclass(frozen=True)
class Poison:
    name: str
    value: bytes | None
    reason: str
    error_class: str
    key: bytes | None = b"poison"
    headers: tuple[tuple[str, bytes], ...] = ()
    #: too large to republish whole: the dead letter carries a prefix, the size and the sha256
    truncated: bool = False
    #: only the real retriever rejects it (a handler's PoisonEvent), not any consumer of the topic
    retriever_only: bool = field(default=False)


def noise(size: int, seed: str, first: bytes = b"\x07") -> bytes:
    """``size`` deterministic bytes starting with ``first`` (not the Avro magic byte 0)."""
    return first + random.Random(seed).randbytes(size - len(first))


def a_request(**kw: object) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="poison", prompt="fix the login bug", trigger=Trigger.USER_PROMPT, **kw)
    return Envelope.root(payload, project="acme/web", session_id="poison", producer="test")


def _written(record: dict[str, object], event_type: str) -> bytes:
    entry = default_registry().current(event_type)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, entry.schema, record)
    return frame(entry.schema_id, buf.getvalue())


def _invalid_request() -> bytes:
    """Well-framed Avro whose payload breaks its bounds (max_items = 0)."""
    record = to_record(a_request())
    record["payload"]["max_items"] = 0
    return _written(record, EventType.RETRIEVAL_REQUESTED)


def _envelope_mismatch() -> bytes:
    """A request body under the request schema id whose envelope claims another event type."""
    record = to_record(a_request())
    record["envelope"]["event_type"] = EventType.CONTEXT_INJECTED
    return _written(record, EventType.RETRIEVAL_REQUESTED)


def _injected_event() -> bytes:
    payload = ContextInjected(
        context_source=ContextSource.NONE,
        pattern_count=0,
        context_size_bytes=0,
        retrieval_duration_ms=0,
        agent_name="poison",
        trigger=Trigger.USER_PROMPT,
        context="",
        context_chars=0,
        token_estimate=0,
    )
    return EventSerializer()(Envelope.root(payload, project="acme/web", session_id="poison", producer="test"))


def corpus() -> list[Poison]:
    """Every poison kind, the 1.1 MB and 10 MB records included."""
    good = EventSerializer()(a_request())
    return [
        Poison("garbage", b"garbage bytes", "undecodable", "EventDecodeError"),
        Poison("bad_magic_byte", b"\x07" + good[1:], "undecodable", "EventDecodeError"),
        Poison("unknown_schema_id", frame(999, good[5:]), "unknown_schema_id", "UnknownSchemaId"),
        Poison("truncated_avro", good[: len(good) // 2], "undecodable", "EventDecodeError"),
        Poison("trailing_bytes", good + b"\x00\x01", "undecodable", "EventDecodeError"),
        Poison("frame_without_body", good[:5], "undecodable", "EventDecodeError"),
        Poison("shorter_than_the_frame", b"\x00\x00", "undecodable", "EventDecodeError"),
        Poison("empty_value", b"", "undecodable", "EventDecodeError"),
        Poison("null_value", None, "undecodable", "EventDecodeError"),
        Poison("wrong_event_type", _injected_event(), "unexpected_event_type", "UnexpectedEventType"),
        Poison("payload_fails_validation", _invalid_request(), "validation_failed", "InvalidEvent"),
        Poison("envelope_mismatch", _envelope_mismatch(), "validation_failed", "InvalidEvent"),
        Poison(
            "unknown_agent_profile",
            EventSerializer()(a_request(agent_role="wizard")),
            "rejected",
            "PoisonEvent",
            retriever_only=True,
        ),
        Poison(
            "binary_and_empty_headers",
            b"\xff\xfe\xfd",
            "undecodable",
            "EventDecodeError",
            headers=(("\u00e9t\u00e9", b"\xff\x00\xfe"), ("empty", b""), ("ctxbus-dlq-reason", b"forged")),
        ),
        # fits the producer limit itself, but not with the dead letter's reason headers added
        Poison(
            "huge_header",
            b"garbage under a huge header",
            "undecodable",
            "EventDecodeError",
            headers=(("x-huge", noise(MIB - 400, "header")),),
            truncated=True,
        ),
        Poison(
            "huge_key",
            b"garbage under a huge key",
            "undecodable",
            "EventDecodeError",
            key=noise(MIB - 400, "key"),
            truncated=True,
        ),
        Poison("just_under_the_limit", noise(MIB - 400, "near"), "undecodable", "EventDecodeError", truncated=True),
        # starts like a request (a valid frame), then 1.1 MB: over every limit
        Poison(
            "over_one_mebibyte", noise(1_100_000, "1.1MB", first=good[:5]), "oversize", "OversizeEvent", truncated=True
        ),
        # the broker holds it and aiokafka's default fetch sizes read it (a whole batch comes back even when it is
        # larger than max_partition_fetch_bytes): about 1 s for this case on the embedded broker
        Poison("ten_megabytes", noise(10_000_000, "10MB"), "oversize", "OversizeEvent", truncated=True),
    ]
