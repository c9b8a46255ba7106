"""The largest record ctxbus sends, checked before a producer client sees it.

A record is sized as aiokafka sizes it before a send (``DefaultRecordBatchBuilder.estimate_size_in_bytes``:
the v2 batch header, the record overhead, key, value and headers), so a record this check lets through is
never refused by the client (the producers' ``max_request_size`` is the same limit). aiokafka is imported
only when a record is sized: the CLI can name :class:`RecordTooLarge` without loading the Kafka client.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Kafka's default record limit (the producer's max.request.size; a broker's message.max.bytes is close to it)
DEFAULT_MAX_RECORD_BYTES = 1_048_576
SETTING = "CTXBUS_KAFKA_MAX_RECORD_BYTES"


class RecordTooLarge(ValueError):
    """A record over the size limit; it was not sent (not a Kafka error: retrying cannot help)."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        self.topic = topic
        self.size = size
        self.limit = limit
        super().__init__(
            f"a record for {topic} is {size:,} bytes, over the limit of {limit:,} bytes ({SETTING}); it was not sent"
        )


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> int:
    """Bytes the record takes in a request, as the producer client counts them."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder  # noqa: PLC0415

    return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers)))


def check_record_size(
    topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]], limit: int
) -> int:
    """The record's size; :class:`RecordTooLarge` when it is over ``limit``."""
    size = record_size(key, value, headers)
    if size > limit:
        raise RecordTooLarge(topic, size, limit)
    return size
