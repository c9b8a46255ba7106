"""Dead-letter records: the original bytes as value, the reason in headers.

A dead letter is the original record (key, value, headers) plus the reason headers. When that does not
fit the record limit (the original was near or over it), the dead letter takes its truncated form: the
first ``prefix_bytes`` of the original value, the value's full size and sha256, the original key cut to
1 KiB and the original headers that fit in 16 KiB; the reason headers are always all there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.limits import record_size
from ctxbus.contract.payloads import DeadLetter
from ctxbus.contract.serde import HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, Headers, encode_dead_letter

#: Longest error message kept in a dead letter, in characters.
MAX_ERROR_MESSAGE_CHARS = 4_000
#: The truncated form keeps at most this much of the original key ...
TRUNCATED_KEY_BYTES = 1_024
#: ... and original headers up to this many bytes (names and values; the others are dropped and counted).
TRUNCATED_HEADERS_BYTES = 16_384
#: room for the value's length prefix (a varint) when the value prefix is sized
_VARINT_ROOM = 8

HEADER_PREFIX = HEADER_DLQ_PREFIX
#: plain headers of the truncated form (``ctxbus-dlq-`` + name)
TRUNCATED = "truncated"
ORIGINAL_SIZE = "original-size"
ORIGINAL_SHA256 = "original-sha256"
ORIGINAL_KEY_SIZE = "original-key-size"
ORIGINAL_HEADERS_DROPPED = "original-headers-dropped"


@dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    key: bytes | None
    value: bytes | None
    headers: Headers
    truncated: bool


def dead_letter_for(
    msg: ConsumerRecord[bytes, bytes], *, group: str, error: BaseException, attempts: int, reason: str
) -> DeadLetter:
    message = f"{reason}: {error}"[:MAX_ERROR_MESSAGE_CHARS]
    return DeadLetter(
        original_topic=msg.topic,
        original_partition=msg.partition,
        original_offset=msg.offset,
        original_timestamp_ms=msg.timestamp,
        consumer_group=group,
        error_class=type(error).__name__,
        error_message=message,
        attempts=attempts,
        failed_at=datetime.now(UTC),
    )


def _own(headers: Sequence[tuple[str, bytes]] | None) -> Headers:
    """The original headers without dead-letter headers (a forged or earlier reason is not kept)."""
    return [h for h in (headers or ()) if not h[0].startswith(HEADER_PREFIX) and h[0] != HEADER_DEAD_LETTER]


def dead_letter_headers(
    record: DeadLetter,
    original: Headers | None,
    *,
    reason: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> Headers:
    """Original headers kept; the reason added as plain headers and as a framed Avro record."""
    plain = {
        "original-topic": record.original_topic,
        "original-partition": str(record.original_partition),
        "original-offset": str(record.original_offset),
        "consumer-group": record.consumer_group,
        "error-class": record.error_class,
        "error-message": record.error_message,
        "attempts": str(record.attempts),
    }
    if reason is not None:
        plain["reason"] = reason
    plain.update(extra or {})
    headers = _own(original)
    headers.extend((HEADER_PREFIX + k, v.encode()) for k, v in plain.items())
    headers.append((HEADER_DEAD_LETTER, encode_dead_letter(record)))
    return headers


def whole_dead_letter(msg: ConsumerRecord[bytes, bytes], record: DeadLetter, reason: str) -> DeadLetterRecord:
    """The original record, untouched, with the reason headers."""
    headers = dead_letter_headers(record, list(msg.headers or ()), reason=reason)
    return DeadLetterRecord(msg.key, msg.value, headers, truncated=False)


def truncated_dead_letter(
    msg: ConsumerRecord[bytes, bytes],
    record: DeadLetter,
    reason: str,
    *,
    max_bytes: int,
    prefix_bytes: int,
    headers_bytes: int = TRUNCATED_HEADERS_BYTES,
) -> DeadLetterRecord:
    """A prefix of the original value (never more than fits ``max_bytes``), its size and sha256, all reasons."""
    original = msg.value or b""
    extra = {
        TRUNCATED: "true",
        ORIGINAL_SIZE: str(len(original)),
        ORIGINAL_SHA256: hashlib.sha256(original).hexdigest(),
    }
    kept: Headers = []
    dropped = 0
    budget = headers_bytes
    for name, header in _own(list(msg.headers or ())):
        cost = len(name.encode()) + len(header or b"")
        if cost <= budget:
            kept.append((name, header))
            budget -= cost
        else:
            dropped += 1
    if dropped:
        extra[ORIGINAL_HEADERS_DROPPED] = str(dropped)
    key: bytes | None = msg.key
    if key is not None and len(key) > TRUNCATED_KEY_BYTES:
        extra[ORIGINAL_KEY_SIZE] = str(len(key))
        key = key[:TRUNCATED_KEY_BYTES]
    headers = dead_letter_headers(record, kept, reason=reason, extra=extra)
    room = max_bytes - record_size(key, b"", headers) - _VARINT_ROOM
    keep = max(0, min(prefix_bytes, len(original), room))
    value: bytes | None = None if msg.value is None else msg.value[:keep]
    return DeadLetterRecord(key, value, headers, truncated=True)


def dead_letter_forms(
    msg: ConsumerRecord[bytes, bytes], record: DeadLetter, reason: str, *, max_bytes: int, prefix_bytes: int
) -> Iterator[DeadLetterRecord]:
    """The dead letters to try, in order: the whole original if it fits ``max_bytes``, else the truncated
    form; then (should a broker with a lower limit refuse them) a bare form with an empty value and no original
    headers: the reason headers, the size and the sha256 only."""
    whole = whole_dead_letter(msg, record, reason)
    if record_size(whole.key, whole.value, whole.headers) <= max_bytes:
        yield whole
    yield truncated_dead_letter(msg, record, reason, max_bytes=max_bytes, prefix_bytes=prefix_bytes)
    yield truncated_dead_letter(msg, record, reason, max_bytes=max_bytes, prefix_bytes=0, headers_bytes=0)
