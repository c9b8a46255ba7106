"""What a handler's preparation gets of a fetch: new events in handling order, each with the records behind it."""

from __future__ import annotations

from ctxbus.adapters.kafka.prepare import fetch_batch
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import RetrievalRequested, Trigger


def request(prompt: str) -> Envelope[RetrievalRequested]:
    payload = RetrievalRequested(agent_name="t", prompt=prompt, trigger=Trigger.USER_PROMPT)
    return Envelope.root(payload, project="p", session_id="s", producer="t")


def test_leaves_out_what_did_not_decode_was_answered_or_repeats_and_counts_what_waits_behind() -> None:
    a, b, c, d = (request(p) for p in "abcd")
    after, batch = fetch_batch([a, ValueError("poison"), b, a, c, d], 8, answered={str(c.event_id)})
    assert [(e.payload.prompt, behind) for e, behind in batch] == [("a", 7), ("b", 5), ("d", 2)]  # type: ignore[union-attr]
    assert after == [1, 3, 6]  # where the events after each one given start
    assert fetch_batch([], 0, answered=set()) == ([], [])
