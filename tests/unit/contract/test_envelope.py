"""The envelope's id rules: root events, causation chains, deterministic derived ids."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from ctxbus.contract.envelope import Envelope, EventType, entity_id_for
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted, RetrievalRequested


def test_root_event_names_itself_as_cause(request_event: Envelope[RetrievalRequested]) -> None:
    assert request_event.causation_id == request_event.event_id
    assert request_event.correlation_id == request_event.event_id
    assert request_event.event_type == EventType.RETRIEVAL_REQUESTED
    assert request_event.entity_id == entity_id_for("acme/web", "sess-1")


def test_chain_keeps_correlation_and_links_causation(
    request_event: Envelope[RetrievalRequested],
    completed_event: Envelope[RetrievalCompleted],
    injected_event: Envelope[ContextInjected],
) -> None:
    assert completed_event.correlation_id == injected_event.correlation_id == request_event.correlation_id
    assert completed_event.causation_id == request_event.event_id
    assert injected_event.causation_id == completed_event.event_id
    assert injected_event.entity_id == request_event.entity_id
    assert len({request_event.event_id, completed_event.event_id, injected_event.event_id}) == 3


def test_derived_ids_are_deterministic(
    request_event: Envelope[RetrievalRequested], completed_event: Envelope[RetrievalCompleted]
) -> None:
    again = request_event.caused(completed_event.payload, producer="retriever")
    assert again.event_id == completed_event.event_id


def test_entity_id_differs_between_projects_sharing_a_session_name() -> None:
    assert entity_id_for("a", "s") != entity_id_for("b", "s")


def test_emitted_at_is_normalised_to_utc(request_event: Envelope[RetrievalRequested]) -> None:
    local = datetime(2026, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    event = request_event.model_copy(update={"emitted_at": local})
    event = Envelope[RetrievalRequested].model_validate(event.model_dump())
    assert event.emitted_at.utcoffset() == timedelta(0)
    assert event.emitted_at.hour == 10


def test_naive_timestamps_and_blank_sessions_are_refused(request_event: Envelope[RetrievalRequested]) -> None:
    data = request_event.model_dump()
    with pytest.raises(ValidationError):
        Envelope[RetrievalRequested].model_validate({**data, "emitted_at": datetime(2026, 1, 1)})
    with pytest.raises(ValidationError):
        Envelope[RetrievalRequested].model_validate({**data, "session_id": ""})


def test_extra_fields_are_refused(request_event: Envelope[RetrievalRequested]) -> None:
    with pytest.raises(ValidationError):
        Envelope[RetrievalRequested].model_validate({**request_event.model_dump(), "surprise": 1})
