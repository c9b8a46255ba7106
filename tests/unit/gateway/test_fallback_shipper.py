"""The fallback spool and its shipper: each answer shipped once, kept while the bus refuses it, set aside when
the contract cannot carry it, claimed by one shipper only."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from ctxbus.contract.payloads import ContextSource, Trigger
from ctxbus.contract.topics import Topics
from ctxbus.gateway.fallback_shipper import FallbackShipper, fallback_event
from ctxbus.hooks import spool

TOPICS = Topics("t")


def entry(**kw: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "project": "acme/web",
        "session_id": "s1",
        "hook_event": "UserPromptSubmit",
        "source": spool.CLIENT_FILE,
        "why": "gateway_unreachable",
        "context": "## Learned Patterns\n\n### Reset revokes sessions\n",
        "pattern_count": 1,
        "retrieval_ms": 4,
        "min_confidence": None,
    }
    fields.update(kw)
    return spool.fallback_record(**fields)


class Publisher:
    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.sent: list[tuple[str, Any]] = []

    async def publish(self, topic: str, event: Any) -> None:
        if self.fail:
            self.fail -= 1
            raise KafkaConnectionError("broker down")
        self.sent.append((topic, event))


def shipper(data: Path, publisher: Publisher) -> FallbackShipper:
    return FallbackShipper(data, TOPICS, publisher)  # type: ignore[arg-type]


async def test_an_answer_waits_while_the_bus_refuses_it_and_is_shipped_once(tmp_path: Path) -> None:
    spool.record(str(tmp_path), entry())
    spool.record(str(tmp_path), entry(session_id="s2"))
    down = Publisher(fail=1)
    assert await shipper(tmp_path, down).ship_once() == 0
    assert spool.pending(str(tmp_path)) == 2 and not down.sent  # both back in the spool
    up = Publisher()
    assert await shipper(tmp_path, up).ship_once() == 2
    assert await shipper(tmp_path, up).ship_once() == 0
    assert [e.session_id for _, e in up.sent] == ["s1", "s2"] and {t for t, _ in up.sent} == {TOPICS.context_injected}
    assert spool.pending(str(tmp_path)) == 0


async def test_a_record_the_contract_cannot_carry_is_set_aside(tmp_path: Path) -> None:
    spool.record(str(tmp_path), entry(hook_event="Stop"))  # not a context event
    (tmp_path / spool.SPOOL_DIR / "000-junk.json").write_text("{not json")
    publisher = Publisher()
    assert await shipper(tmp_path, publisher).ship_once() == 0
    assert sorted(p.name.endswith(spool.BAD) for p in (tmp_path / spool.SPOOL_DIR).iterdir()) == [True, True]
    assert spool.pending(str(tmp_path)) == 0


def test_one_claimant_per_answer_and_a_dead_shippers_claim_is_taken_again(tmp_path: Path) -> None:
    spool.record(str(tmp_path), entry())
    (first,) = spool.claim(str(tmp_path))
    assert spool.claim(str(tmp_path)) == []  # claimed, and fresh
    later = time.time() + spool.STALE_CLAIM_S + 1
    (again,) = spool.claim(str(tmp_path), now=later)
    assert again[1]["id"] == first[1]["id"]


def test_a_full_spool_records_nothing_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool, "MAX_SPOOLED", 2)
    assert spool.record(str(tmp_path), entry()) and spool.record(str(tmp_path), entry())
    assert spool.record(str(tmp_path), entry()) is None
    assert spool.pending(str(tmp_path)) == 2
    assert oct(os.stat(tmp_path / spool.SPOOL_DIR).st_mode & 0o777) == "0o700"


def test_the_event_of_an_answer() -> None:
    record = entry(min_confidence=0.5, correlation_id=str(uuid.uuid4()), causation_id=str(uuid.uuid4()))
    event = fallback_event(record)
    p = event.payload
    assert event.event_id == uuid.UUID(hex=record["id"])  # shipped twice: the same event id
    assert str(event.correlation_id) == record["correlation_id"] and str(event.causation_id) == record["causation_id"]
    assert p.context_source is ContextSource.FALLBACK_STATIC and p.trigger is Trigger.USER_PROMPT
    assert (p.pattern_count, p.min_confidence_threshold, p.retrieval_duration_ms) == (1, 0.5, 4)
    assert event.emitted_at.timestamp() == pytest.approx(record["at"])
    empty = fallback_event(entry(context="", hook_event="SessionStart", source=spool.GATEWAY_FILE, why="timeout"))
    assert empty.payload.context_source is ContextSource.NONE and empty.payload.pattern_count == 0
    assert empty.payload.empty_reason == "fallback:timeout" and empty.payload.trigger is Trigger.SESSION_START
    assert empty.correlation_id == empty.event_id == empty.causation_id
