"""What capture learns, as data (pure): the lesson of each rule and the facts it rests on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ctxbus.capture.signature import Signature
from ctxbus.capture.steps import Span
from ctxbus.contract.payloads import Outcome


class RuleName(StrEnum):
    FAILURE_FIX = "failure_fix"
    EPISODE = "episode"
    CORRECTION = "correction"
    REMEMBER = "remember"


@dataclass(frozen=True, slots=True)
class Fix:
    """A failure_fix lesson's facts."""

    signature: Signature
    failed_command: str
    #: times the error was hit before the fix
    hits: int
    #: (path, gist of the added lines) of the edits after its first failure, in order, one per path
    edits: tuple[tuple[str, str], ...]
    verified_by: str
    #: the session's task (its first prompt), clipped: the work the error came up in
    task: str = ""
    #: commands that rewrote files in between (a formatter, ``--fix``, code generation), in order
    rewrites: tuple[str, ...] = ()
    #: the step of a wrapper that failed (``make lint`` -> ``mix credo --strict``: :mod:`ctxbus.capture.inner_step`)
    failed_step: str = ""


@dataclass(frozen=True, slots=True)
class Episode:
    task: str
    follow_ups: tuple[str, ...]
    files: tuple[str, ...]
    commands: tuple[str, ...]
    outcome: Outcome
    deciding_rule: str
    #: the first sentences of the session's last answer (what was done, in the assistant's words)
    result: str = ""


@dataclass(frozen=True, slots=True)
class Said:
    """A correction or a remembered text, in the user's words."""

    quote: str
    negative: bool
    #: what the assistant had just done (a command, the files it edited): the situation the rule was said in
    after: str = ""
    #: the session's task (a correction's): the kind of work the rule was given for, so similar work finds it
    task: str = ""


@dataclass(frozen=True, slots=True)
class Lesson:
    rule: RuleName
    span: Span
    fact: Fix | Episode | Said
