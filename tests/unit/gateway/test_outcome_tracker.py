"""The gateway's outcome windows: when an outcome is published and that each piece of evidence is counted once.

The publisher here records what it is given (the real broker path is covered by
tests/integration/test_outcome_inference.py); transcripts are real files.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import Outcome, OutcomeRecorded
from ctxbus.contract.topics import Topics
from ctxbus.core.learning import InjectionFact, OutcomeFact, feedback_counts
from ctxbus.gateway.outcomes import OutcomeTracker, outcome_event_id

from .transcripts import FAIL, PASS, append, bash, hook, post_tool_use, prompt, result, say

PROJECT = "acme/web"


class Recorder:
    """Stands in for the Kafka publisher: keeps what is published; fails the next ``fail`` calls."""

    def __init__(self) -> None:
        self.events: list[Envelope[OutcomeRecorded]] = []
        self.fail = 0

    async def publish(self, topic: str, event: Envelope[OutcomeRecorded]) -> None:
        assert topic == "t.context.outcome.recorded.v1"
        if self.fail:
            self.fail -= 1
            raise KafkaTimeoutError()
        self.events.append(event)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def tracker(recorder: Recorder) -> OutcomeTracker:
    return OutcomeTracker(Topics("t"), recorder)  # type: ignore[arg-type]


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """The session's transcript, in a directory of project PROJECT (the hooks' cwd; never the gateway's env)."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "ctxbus.json").write_text(json.dumps({"project": PROJECT}))
    path = tmp_path / "s1.jsonl"
    path.touch()
    return path


def outcomes(recorder: Recorder) -> list[tuple[str, str]]:
    return [(e.payload.outcome.value, e.payload.source) for e in recorder.events]


async def test_a_piped_test_failure_then_stop_publishes_failed(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    assert await tracker.tool_result(post_tool_use(transcript, "toolu_1", FAIL), 1.0) == "evidence_recorded"
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "outcome_published"
    (event,) = recorder.events
    assert event.project == PROJECT and event.session_id == "s1"
    assert (event.payload.outcome, event.payload.source) == (Outcome.FAILED, "hook.Stop:checks_failed")
    assert event.payload.scope.value == "session"
    assert "`pytest -q 2>&1 | tail -3` failed (failure_summary: 1 failed, 3 passed in 0.20s)" in event.payload.notes
    assert event.event_id == outcome_event_id(PROJECT, "s1", ("toolu_1",))


async def test_the_transcript_order_wins_over_the_order_hooks_arrive_in(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    # the failed run (exit 1) reached no PostToolUse hook; the transcript holds it, before the pass
    await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="fix the reset test"), 1.0)
    await tracker.tool_result(post_tool_use(transcript, "toolu_2", PASS), 1.0)
    append(transcript, prompt("fix the reset test"), bash("toolu_1"), result("toolu_1", FAIL, 1))
    append(transcript, bash("toolu_2"), result("toolu_2", PASS), say("Fixed."))
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert outcomes(recorder) == [("successful", "hook.Stop:checks_fixed")]
    assert recorder.events[0].event_id == outcome_event_id(PROJECT, "s1", ("toolu_1", "toolu_2"))


async def test_each_turn_publishes_only_its_own_evidence(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    await tracker.session_started(hook("SessionStart", transcript, source="startup"))
    append(transcript, prompt("a"), bash("t1"), result("t1", FAIL, 1))
    await tracker.stop(hook("Stop", transcript), 1.0)
    append(transcript, prompt("b"), bash("t2"), result("t2", PASS))
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert outcomes(recorder) == [("failed", "hook.Stop:checks_failed"), ("successful", "hook.Stop:checks_passed")]
    assert [e.event_id for e in recorder.events] == [
        outcome_event_id(PROJECT, "s1", ("t1",)),
        outcome_event_id(PROJECT, "s1", ("t2",)),
    ]


async def test_a_turn_without_evidence_publishes_nothing_and_its_window_stays_open(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    await tracker.session_started(hook("SessionStart", transcript, source="startup"))
    append(transcript, prompt("explain x"), bash("t0", "npm test"))
    append(transcript, result("t0", "Exit code 137\n[Request interrupted by user for tool use]", 137), say("x is..."))
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "no_evidence"
    assert recorder.events == []
    append(transcript, prompt("now fix it"), bash("t1"), result("t1", PASS))
    await tracker.stop(hook("Stop", transcript), 1.0)
    (event,) = recorder.events
    assert event.payload.outcome is Outcome.SUCCESSFUL
    assert event.event_id == outcome_event_id(PROJECT, "s1", ("t0", "t1"))  # the open window's evidence with it


async def test_a_turn_gets_one_outcome_feedback_on_a_turn_published_at_stop_adds_none(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    """Issue 21: a turn's outcome was counted twice (at Stop, then again for "that worked" in the next prompt)."""
    first = hook("UserPromptSubmit", transcript, prompt="close the modal after saving")
    await tracker.prompt(first, 1.0)
    turn1 = uuid.uuid4()
    tracker.turn_started(first, turn1)
    append(transcript, prompt("close the modal after saving"), bash("t1", "npm test"), result("t1", "Tests: 4 passed"))
    await tracker.stop(hook("Stop", transcript), 1.0)
    second = hook("UserPromptSubmit", transcript, prompt="that worked, thanks! now the logout button")
    assert await tracker.prompt(second, 1.0) == "turn_has_its_outcome"
    tracker.turn_started(second, uuid.uuid4())
    assert outcomes(recorder) == [("successful", "hook.Stop:checks_passed")]
    assert recorder.events[0].correlation_id == turn1
    # the feedback is no evidence for the next turn either: its Stop has none
    append(transcript, prompt("that worked, thanks! now the logout button"), say("Looking."))
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "no_evidence"
    # the next turn's own feedback, its Stop having decided nothing, is that turn's one outcome
    third = hook("UserPromptSubmit", transcript, prompt="still broken, the button does nothing")
    assert await tracker.prompt(third, 1.0) == "outcome_published"
    assert outcomes(recorder) == [
        ("successful", "hook.Stop:checks_passed"),
        ("failed", "hook.UserPromptSubmit:user_feedback_decides"),
    ]
    assert await tracker.session_end(hook("SessionEnd", transcript), 1.0) == "no_evidence"
    assert len(recorder.events) == 2


async def test_feedback_closes_an_open_window_and_a_first_prompt_is_never_feedback(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    assert await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="still failing"), 1.0) == "no_feedback"
    append(transcript, prompt("still failing"), say("I changed the CSS."))
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert recorder.events == []
    assert await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="that worked, thanks!"), 1.0) == (
        "outcome_published"
    )
    assert outcomes(recorder) == [("successful", "hook.UserPromptSubmit:user_feedback_decides")]


async def test_session_end_publishes_unknown_only_for_a_session_without_any_outcome(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path, tmp_path: Path
) -> None:
    append(transcript, prompt("explain"), say("It works like this."))
    await tracker.stop(hook("Stop", transcript), 1.0)
    await tracker.session_end(hook("SessionEnd", transcript, reason="logout"), 1.0)
    (event,) = recorder.events
    assert (event.payload.outcome, event.payload.source) == (Outcome.UNKNOWN, "hook.SessionEnd:no_evidence")
    assert event.payload.notes is not None and event.payload.notes.endswith("reason: logout")
    other = tmp_path / "s2.jsonl"
    append(other, prompt("fix"), bash("t9"), result("t9", PASS))
    await tracker.stop(hook("Stop", other, session="s2"), 1.0)
    assert await tracker.session_end(hook("SessionEnd", other, session="s2"), 1.0) == "no_evidence"
    assert outcomes(recorder)[1:] == [("successful", "hook.Stop:checks_passed")]
    assert tracker.sessions() == 0


async def test_an_interrupted_turn_is_read_at_the_next_prompt(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="fix it"), 1.0)
    append(transcript, prompt("fix it"), bash("t1"), result("t1", FAIL, 1))  # no Stop: the user pressed Esc
    await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="try the other fixture"), 1.0)
    append(transcript, prompt("try the other fixture"), bash("t2"), result("t2", PASS), say("Done."))
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert outcomes(recorder) == [("successful", "hook.Stop:checks_fixed")]


async def test_a_restarted_gateway_rereads_the_last_turn_as_the_same_event(
    recorder: Recorder, transcript: Path
) -> None:
    append(transcript, prompt("old turn"), bash("t0"), result("t0", FAIL, 1), say("Broken."))
    first = OutcomeTracker(Topics("t"), recorder)  # type: ignore[arg-type]
    await first.prompt(hook("UserPromptSubmit", transcript, prompt="fix it"), 1.0)
    append(transcript, prompt("fix it"), bash("t1"), result("t1", PASS), say("Fixed."))
    await first.stop(hook("Stop", transcript), 1.0)
    restarted = OutcomeTracker(Topics("t"), recorder)  # type: ignore[arg-type]
    await restarted.stop(hook("Stop", transcript), 1.0)  # e.g. a Stop hook run twice around a restart
    a, b = recorder.events
    assert a.event_id == b.event_id == outcome_event_id(PROJECT, "s1", ("t1",))  # never the old turn's t0
    # the learning loop counts an event id once: one success for the injected item, not two
    injected = InjectionFact("i1", PROJECT, "s1", None, datetime(2020, 1, 1, tzinfo=UTC), ((PROJECT, "m1"),))
    facts = [
        OutcomeFact(str(e.event_id), PROJECT, "s1", None, "session", e.payload.outcome.value, e.emitted_at)
        for e in (a, b)
    ]
    counts = feedback_counts([injected], facts)
    assert (counts[(PROJECT, "m1")].uses, counts[(PROJECT, "m1")].successes) == (1, 1)


async def test_a_failed_publish_is_sent_again_unchanged_before_anything_else(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    recorder.fail = 1
    await tracker.tool_result(post_tool_use(transcript, "t1", FAIL), 1.0)
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "publish_failed"
    await tracker.tool_result(post_tool_use(transcript, "t2", PASS), 1.0)  # the next hook of the session resends it
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert outcomes(recorder) == [("failed", "hook.Stop:checks_failed"), ("successful", "hook.Stop:checks_passed")]
    assert recorder.events[0].event_id == outcome_event_id(PROJECT, "s1", ("t1",))
    assert recorder.events[1].event_id == outcome_event_id(PROJECT, "s1", ("t2",))  # t1 is not counted again


async def test_late_duplicates_other_tools_and_non_checks(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    append(transcript, prompt("run tests"), bash("t1"), result("t1", PASS))
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert await tracker.tool_result(post_tool_use(transcript, "t1", PASS), 1.0) == "evidence_recorded"
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "no_evidence"  # t1 was counted already
    read: dict[str, Any] = {**post_tool_use(transcript, "t3", PASS), "tool_name": "Read"}
    assert await tracker.tool_result(read, 1.0) == "not_a_check"
    assert await tracker.tool_result(post_tool_use(transcript, "t4", FAIL, command="grep -rn FAILED ."), 1.0) == (
        "not_a_check"
    )
    assert len(recorder.events) == 1


async def test_post_tool_use_failure_input(tracker: OutcomeTracker, recorder: Recorder, transcript: Path) -> None:
    failure = hook(
        "PostToolUseFailure",
        transcript,
        tool_name="Bash",
        tool_input={"command": "cargo test"},
        tool_use_id="t1",
        error="Exit code 101\nerror[E0382]: use of moved value: `config`",
        is_interrupt=False,
    )
    assert await tracker.tool_result(failure, 1.0) == "evidence_recorded"
    await tracker.stop(hook("Stop", transcript), 1.0)
    assert outcomes(recorder) == [("failed", "hook.Stop:checks_failed")]
    assert "failure_summary" in (recorder.events[0].payload.notes or "")


async def test_an_unsent_outcome_goes_first_and_feedback_on_its_turn_adds_none(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path
) -> None:
    append(transcript, prompt("fix"), bash("t1"), result("t1", FAIL, 1), say("Still red."))
    recorder.fail = 2  # the Stop's outcome and its first resend
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "publish_failed"
    assert await tracker.prompt(hook("UserPromptSubmit", transcript, prompt="that worked"), 1.0) == "publish_failed"
    append(transcript, prompt("that worked"), say("Great."))
    # the first turn's outcome, sent again; the feedback on that turn adds no second one, nor joins this turn
    assert await tracker.stop(hook("Stop", transcript), 1.0) == "no_evidence"
    assert outcomes(recorder) == [("failed", "hook.Stop:checks_failed")]


async def test_without_a_transcript_no_prompt_waits_for_a_thread(
    tracker: OutcomeTracker, recorder: Recorder, transcript: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook whose transcript is no readable file (``/dev/null``, none at all) has nothing to read: its prompts
    are not sent through a worker thread to learn that (each hop costs the hook's answer time)."""

    async def no_thread(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a thread hop for a transcript that is not there")

    monkeypatch.setattr("ctxbus.gateway.outcomes.asyncio.to_thread", no_thread)
    no_file = {**hook("UserPromptSubmit", transcript, prompt="fix the login"), "transcript_path": "/dev/null"}
    await tracker.session_started({**no_file, "hook_event_name": "SessionStart"})
    for text in ("fix the login", "that worked, thanks", "now the logout"):
        assert await tracker.prompt({**no_file, "prompt": text}, 1.0) == "no_feedback"
    assert recorder.events == []
