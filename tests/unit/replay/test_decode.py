"""Decoding with schemas/ alone: facts from every event type, old and new schema versions side by side,
and everything undecodable skipped and counted by reason."""

from __future__ import annotations

import io
from datetime import timedelta

import fastavro
import pytest

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import DeadLetter, Outcome, RetrievalRequested, Trigger
from ctxbus.contract.registry import default_registry
from ctxbus.contract.serde import HEADER_DEAD_LETTER, encode_dead_letter, frame, to_record
from ctxbus.replay.decode import DLQ_HEADER_PREFIX, Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.facts import (
    SKIP_REASONS,
    CompletedFact,
    DeadLetterFact,
    InjectedFact,
    OutcomeFact,
    RawRecord,
    RequestedFact,
)
from ctxbus.replay.reader_schemas import COMPLETED_PROJECTION, project_schema, strip_logical_types

from .events import T0, TOPICS, chain, outcome, raw, serialize


@pytest.fixture
def decoder() -> Decoder:
    return Decoder(topic_types(TOPICS), TOPICS.dead_letter)


def us(moment: object) -> int:
    return int(moment.timestamp() * 1_000_000)  # type: ignore[attr-defined]


def test_every_stage_becomes_a_fact_with_the_envelope_and_payload_facts(decoder: Decoder) -> None:
    req, done, inj = chain(retrieved=("a", "b", "c"), injected=("b", "a"), tokens=77, task_id="T-1")
    end = outcome(Outcome.FAILED, at=T0 + timedelta(minutes=1))
    facts, stats = decoder.decode([raw(req), raw(done), raw(inj), raw(end)])
    assert stats.records == stats.decoded == 4 and not stats.skipped
    r, c, i, o = facts
    assert isinstance(r, RequestedFact) and isinstance(c, CompletedFact)
    assert isinstance(i, InjectedFact) and isinstance(o, OutcomeFact)
    assert r.correlation_id == c.correlation_id == i.correlation_id == str(req.correlation_id)
    assert r.event_id == str(req.event_id) and r.emitted_us == us(req.emitted_at)
    assert (r.agent_name, r.agent_role, r.trigger, r.task_type, r.task_id) == (
        "claude-code",
        "implementer",
        "user_prompt",
        "bugfix",
        "T-1",
    )
    assert c.request_emitted_us == us(req.emitted_at) and c.emitted_us == us(done.emitted_at)
    assert c.item_ids == ("a", "b", "c") and c.profile == "implementer" and c.fingerprint == "fp1"
    assert c.candidates == 9 and c.retrieval_ms == 20.0 and c.task_id == "T-1"
    assert i.item_ids == ("b", "a") and i.token_estimate == 77 and i.context_chars == 308
    assert i.request_emitted_us == us(req.emitted_at) and i.context_source == "rag_query"
    assert (o.outcome, o.scope, o.session_id, o.project) == ("failed", "session", "s1", "acme/web")
    assert stats.versions == {
        ("context.retrieval.requested", 3): 1,
        ("context.retrieval.completed", 3): 1,
        ("context.injected", 4): 1,
        ("context.outcome.recorded", 1): 1,
    }


def _write_with(schema_id: int, event: Envelope) -> bytes:  # type: ignore[type-arg]
    """``event`` written with an older schema (fields it lacks are simply not written)."""
    schema = fastavro.parse_schema(default_registry().by_id(schema_id).schema)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, to_record(event))  # type: ignore[arg-type]
    return frame(schema_id, buf.getvalue())


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_version_1_events_read_beside_the_current_version_with_the_same_facts(decoder: Decoder, stage: int) -> None:
    event = chain()[stage]
    old_id = {0: 1, 1: 2, 2: 3}[stage]  # archived v1 ids of requested, completed, injected
    assert default_registry().by_id(old_id).version == 1
    new = raw(event)
    old = RawRecord(new.topic, 0, 1, new.timestamp_ms, _write_with(old_id, event))
    facts, stats = decoder.decode([new, old])
    assert not stats.skipped
    fresh, archived = facts
    assert fresh._replace(schema_id=0) == archived._replace(schema_id=0)
    assert archived.schema_id == old_id
    current = default_registry().current(event.event_type).version
    assert sorted(v for (_, v) in stats.versions) == [1, current]


def test_the_completed_projection_reads_what_a_full_decode_reads(decoder: Decoder) -> None:
    _, done, _ = chain(retrieved=("x", "y", "z", "w"))
    entry = default_registry().current("context.retrieval.completed")
    writer = strip_logical_types(entry.schema)
    value = serialize(done)
    full = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(writer), None)
    reader = fastavro.parse_schema(project_schema(writer, {"envelope": True, "payload": COMPLETED_PROJECTION}))
    projected = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(writer), reader)
    assert projected["envelope"] == full["envelope"]
    for key in ("request_emitted_at", "profile", "fingerprint", "candidates_considered", "empty_reason"):
        assert projected["payload"][key] == full["payload"][key]
    assert [i["id"] for i in projected["payload"]["items"]] == ["x", "y", "z", "w"]
    assert set(projected["payload"]["items"][0]) == {"id", "project"}  # contents and breakdowns are skipped
    (fact,), _ = decoder.decode([raw(done)])
    assert isinstance(fact, CompletedFact) and fact.item_ids == ("x", "y", "z", "w")


def _requested_bytes() -> bytes:
    return serialize(chain()[0])


@pytest.mark.parametrize(
    ("value", "topic", "reason"),
    [
        (None, TOPICS.retrieval_requested, "tombstone"),
        (b"hello, not an event", TOPICS.retrieval_requested, "bad_framing"),
        (b"\x00\x00", TOPICS.retrieval_requested, "bad_framing"),
        (frame(9_999, b"\x02ab"), TOPICS.retrieval_requested, "unknown_schema_id"),
        (frame(8, b"\x99\x99\x99"), TOPICS.retrieval_requested, "undecodable"),
        (_requested_bytes() + b"trailing", TOPICS.retrieval_requested, "undecodable"),
        (_requested_bytes(), TOPICS.context_injected, "unexpected_event_type"),
        (b"anything", TOPICS.dead_letter, "not_a_dead_letter"),
    ],
)
def test_what_cannot_be_decoded_is_skipped_and_counted_by_reason(
    decoder: Decoder, value: bytes | None, topic: str, reason: str
) -> None:
    good = raw(chain()[0])
    facts, stats = decoder.decode([RawRecord(topic, 1, 7, 0, value), good])
    assert len(facts) == 1 and stats.records == 2 and stats.decoded == 1
    assert stats.skipped == {(topic, reason): 1}
    assert stats.skipped_by_reason() == {reason: 1}
    assert reason in SKIP_REASONS


def test_an_envelope_contradicting_its_schema_id_is_skipped(decoder: Decoder) -> None:
    event = chain()[0]
    record = to_record(event)
    record["envelope"]["event_type"] = "context.injected"
    entry = default_registry().current("context.retrieval.requested")
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(entry.schema), record)
    facts, stats = decoder.decode(
        [RawRecord(TOPICS.retrieval_requested, 0, 0, 0, frame(entry.schema_id, buf.getvalue()))]
    )
    assert not facts and stats.skipped_by_reason() == {"envelope_mismatch": 1}


def _dead_letter(message: str) -> DeadLetter:
    return DeadLetter(
        original_topic=TOPICS.retrieval_requested,
        original_partition=0,
        original_offset=12,
        consumer_group="t.retriever",
        error_class="PoisonEvent",
        error_message=message,
        attempts=1,
        failed_at=T0,
    )


def test_a_dead_letter_is_read_from_its_framed_header_and_linked_to_its_request(decoder: Decoder) -> None:
    req = chain()[0]
    record = _dead_letter("rejected: unknown agent profile 'wizard'")
    headers = ((HEADER_DEAD_LETTER, encode_dead_letter(record)),)
    (fact,), stats = decoder.decode([RawRecord(TOPICS.dead_letter, 2, 40, 1_000, serialize(req), headers)])
    assert isinstance(fact, DeadLetterFact)
    assert (fact.reason, fact.error_class, fact.original_offset, fact.consumer_group) == (
        "rejected",
        "PoisonEvent",
        12,
        "t.retriever",
    )
    assert fact.event_type == "context.retrieval.requested" and fact.correlation_id == str(req.correlation_id)
    assert (fact.partition, fact.offset) == (2, 40)
    assert stats.versions == {("deadletter", 1): 1}


def test_a_dead_letter_with_plain_headers_only_and_foreign_bytes_is_still_counted(decoder: Decoder) -> None:
    headers = tuple(
        (DLQ_HEADER_PREFIX + k, v.encode())
        for k, v in {
            "original-topic": TOPICS.retrieval_requested,
            "original-partition": "0",
            "original-offset": "3",
            "error-class": "EventDecodeError",
            "error-message": "undecodable: magic byte is 104, expected 0",
            "consumer-group": "t.retriever",
        }.items()
    )
    (fact,), _ = decoder.decode([RawRecord(TOPICS.dead_letter, 0, 0, 0, b"hello", headers)])
    assert isinstance(fact, DeadLetterFact)
    assert (fact.reason, fact.error_class, fact.original_offset) == ("undecodable", "EventDecodeError", 3)
    assert fact.event_type is None and fact.correlation_id is None


def test_events_the_report_only_counts_are_decoded_to_their_envelope(decoder: Decoder) -> None:
    from ctxbus.contract.payloads import AttemptRecorded, AttemptStatus

    attempt = Envelope.root(
        AttemptRecorded(task_id="T", attempt_number=1, provider="p", status=AttemptStatus.FAILED),
        project="acme/web",
        session_id="s",
        producer="test",
    )
    facts, stats = decoder.decode([raw(attempt, topic=TOPICS.attempt_recorded)])
    assert facts == [] and stats.decoded == 1 and stats.versions == {("agent.attempt.recorded", 2): 1}


def test_a_request_with_defaults_only_decodes(decoder: Decoder) -> None:
    bare = Envelope.root(
        RetrievalRequested(agent_name="a", prompt="p", trigger=Trigger.GAP), project="p", session_id="s", producer="t"
    )
    (fact,), _ = decoder.decode([raw(bare)])
    assert isinstance(fact, RequestedFact)
    assert (fact.agent_role, fact.task_type, fact.task_id, fact.max_tokens, fact.trigger) == (
        "implementer",
        None,
        None,
        2_000,
        "gap",
    )
