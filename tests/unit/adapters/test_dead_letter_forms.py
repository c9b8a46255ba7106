"""Which dead letter a record gets: whole when it fits, else truncated within the limit; the size settings."""

from __future__ import annotations

import hashlib

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import ConsumerRecord
from pydantic import ValidationError

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.dead_letter import (
    TRUNCATED_KEY_BYTES,
    DeadLetterRecord,
    dead_letter_for,
    dead_letter_forms,
    truncated_dead_letter,
)
from ctxbus.adapters.kafka.limits import DEFAULT_MAX_RECORD_BYTES, RecordTooLarge, check_record_size, record_size
from ctxbus.contract.payloads import DeadLetter
from ctxbus.contract.serde import HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, decode_dead_letter, header_value
from ctxbus.settings import KafkaSettings, ServiceSettings, Settings

MIB = 1_048_576
TOPIC = "ctxbus.context.retrieval.requested.v1"


def a_record(
    value: bytes | None, key: bytes | None = b"k", headers: list[tuple[str, bytes]] | None = None
) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=TOPIC,
        partition=1,
        offset=41,
        timestamp=1_700_000_000_000,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value or b""),
        headers=headers or [],
    )


def letters(
    msg: ConsumerRecord[bytes, bytes], *, max_bytes: int = MIB, prefix: int = 65_536, message: str = "x"
) -> tuple[DeadLetter, list[DeadLetterRecord]]:
    record = dead_letter_for(msg, group="ctxbus.retriever", error=ValueError(message), attempts=1, reason="undecodable")
    return record, list(dead_letter_forms(msg, record, "undecodable", max_bytes=max_bytes, prefix_bytes=prefix))


def plain(headers: list[tuple[str, bytes]], name: str) -> str | None:
    return header_value(headers, HEADER_DLQ_PREFIX + name)


def test_a_record_that_fits_is_dead_lettered_whole_first() -> None:
    msg = a_record(b"garbage", headers=[("trace", b"1")])
    _, (whole, truncated, bare) = letters(msg)
    assert (whole.value, whole.key, whole.truncated) == (b"garbage", b"k", False)
    assert whole.headers[0] == ("trace", b"1") and plain(whole.headers, "reason") == "undecodable"
    assert plain(whole.headers, "truncated") is None
    assert truncated.truncated and bare.truncated and bare.value == b""  # the smaller forms, should a broker refuse


def test_a_record_too_large_to_republish_is_truncated_within_the_limit() -> None:
    value = bytes(range(256)) * 4_300  # 1.1 MB
    _, forms = letters(a_record(value))
    truncated = forms[0]  # the whole record is not even offered
    assert truncated.truncated and truncated.value == value[:65_536]
    assert plain(truncated.headers, "original-size") == str(len(value))
    assert plain(truncated.headers, "original-sha256") == hashlib.sha256(value).hexdigest()
    framed = decode_dead_letter(dict(truncated.headers)[HEADER_DEAD_LETTER])
    assert framed.original_offset == 41 and framed.error_message == "undecodable: x"


@pytest.mark.parametrize("max_bytes", [65_536, 200_000, MIB])
@pytest.mark.parametrize(
    ("value", "key", "headers"),
    [
        (b"v" * (MIB - 300), b"k", []),
        (b"v" * 10_000_000, b"k" * 5_000, [("h", b"x" * 15_000), ("i", b"y" * 15_000)]),
        (b"short", b"k" * (MIB - 300), []),
        (None, b"k", [("big", b"z" * (MIB - 300))]),
        (b"", None, [(f"h{i}", b"w" * 1_000) for i in range(500)]),
    ],
)
def test_every_form_fits_the_limit_whatever_the_original(
    max_bytes: int, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes]]
) -> None:
    """The smallest limit, the largest prefix allowed for it, the longest (multi-byte) error message."""
    msg = a_record(value, key, headers)
    _, forms = letters(msg, max_bytes=max_bytes, prefix=max_bytes // 2, message="\u00e9" * 5_000)
    for letter in forms:
        assert record_size(letter.key, letter.value, letter.headers) <= max_bytes
        if letter.truncated:
            assert letter.key is None or len(letter.key) <= TRUNCATED_KEY_BYTES
            assert plain(letter.headers, "original-size") == str(len(value or b""))
            assert (value or b"").startswith(letter.value or b"")
            assert (letter.value is None) == (value is None)


def test_cut_keys_and_dropped_headers_are_counted() -> None:
    msg = a_record(b"v" * MIB, b"k" * 3_000, [("small", b"s"), ("big", b"b" * 20_000), ("ctxbus-dlq-reason", b"x")])
    record = dead_letter_for(msg, group="g", error=ValueError("e"), attempts=1, reason="oversize")
    letter = truncated_dead_letter(msg, record, "oversize", max_bytes=MIB, prefix_bytes=10)
    assert letter.key == b"k" * TRUNCATED_KEY_BYTES and letter.value == b"v" * 10
    assert plain(letter.headers, "original-key-size") == "3000"
    assert plain(letter.headers, "original-headers-dropped") == "1"
    assert [h for h in letter.headers if not h[0].startswith("ctxbus-")] == [("small", b"s")]
    assert plain(letter.headers, "reason") == "oversize"  # not the forged one


def test_record_size_is_the_clients_own_estimate_and_the_check_names_size_and_limit() -> None:
    headers = [("a", b"1"), ("\u00e9", b"")]
    assert record_size(b"k", b"v" * 1_000, headers) == DefaultRecordBatchBuilder.estimate_size_in_bytes(
        b"k", b"v" * 1_000, headers
    )
    assert check_record_size("t", None, b"v", [], 100) == record_size(None, b"v", [])
    with pytest.raises(RecordTooLarge) as refused:
        check_record_size("t", None, b"v" * 200, [], 100)
    assert str(refused.value).startswith("a record for t is 2")
    assert "over the limit of 100 bytes (CTXBUS_KAFKA_MAX_RECORD_BYTES); it was not sent" in str(refused.value)


def test_producers_get_the_limit_as_their_request_size() -> None:
    assert KafkaSettings().max_record_bytes == DEFAULT_MAX_RECORD_BYTES == MIB
    cfg = KafkaClientConfig(KafkaSettings(max_record_bytes=5_000_000), "127.0.0.1:1", embedded=True)
    assert cfg.producer("x")["max_request_size"] == 5_000_000


def test_the_dead_letter_prefix_must_stay_well_under_the_record_limit() -> None:
    assert ServiceSettings().dead_letter_prefix_bytes == 65_536
    Settings(kafka=KafkaSettings(max_record_bytes=200_000), service=ServiceSettings(dead_letter_prefix_bytes=100_000))
    with pytest.raises(ValidationError, match="at most half of CTXBUS_KAFKA_MAX_RECORD_BYTES"):
        Settings(
            kafka=KafkaSettings(max_record_bytes=200_000), service=ServiceSettings(dead_letter_prefix_bytes=100_001)
        )
    with pytest.raises(ValidationError):
        KafkaSettings(max_record_bytes=1_000)
