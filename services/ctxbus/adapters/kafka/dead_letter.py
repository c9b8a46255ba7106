"""Dead-letter records: the original bytes as value, the reason in headers."""

from __future__ import annotations

from datetime import UTC, datetime

from aiokafka.structs import ConsumerRecord

from ctxbus.contract.payloads import DeadLetter
from ctxbus.contract.serde import HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, Headers, encode_dead_letter

#: Longest error message kept in a dead letter, in characters.
MAX_ERROR_MESSAGE_CHARS = 4_000

HEADER_PREFIX = HEADER_DLQ_PREFIX


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


def dead_letter_headers(record: DeadLetter, original: Headers | None) -> Headers:
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
    headers = [h for h in (original or []) if not h[0].startswith(HEADER_PREFIX) and h[0] != HEADER_DEAD_LETTER]
    headers.extend((HEADER_PREFIX + k, v.encode()) for k, v in plain.items())
    headers.append((HEADER_DEAD_LETTER, encode_dead_letter(record)))
    return headers
