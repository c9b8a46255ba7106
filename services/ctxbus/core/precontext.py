"""Pre-context for agent switching (seed 003): at most 10 lines telling a fallback provider, a retry or
a helper agent what the previous attempts did and why they failed.

Pure and total: missing or corrupt attempt data gives an empty string, never an exception.
Formats are seed 003's appendix, line for line; every limit is a field of :class:`PreContextPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxbus.contract.payloads import AttemptStatus
from ctxbus.core.tokens import estimate_tokens

TRUNCATED_LINE = "--- CONTEXT TRUNCATED ---"
END_LINE = "--- END CONTEXT ---"
LOOP_LINE = "Task appears stuck in validation loop - try different approach"
#: attempts with the same first error that make a loop
LOOP_LENGTH = 3
#: the project of attempts recorded without one (``ctxbus attempt record`` / ``ctxbus precontext``'s
#: default, and the project given to attempts stored before attempts were keyed by project)
DEFAULT_PROJECT = "default"

#: how a task ends, by the outcome recorded for it (scope ``task``): any task outcome ends the task's
#: pre-context; a successful or partial one completes it, a failed or unknown one abandons it
TASK_END_STATES: dict[str, str] = {
    "successful": "completed",
    "partial": "completed",
    "failed": "abandoned",
    "unknown": "abandoned",
}


def task_end_state(outcome: str) -> str:
    """``completed`` or ``abandoned`` for a task outcome (anything unrecognised abandons)."""
    return TASK_END_STATES.get(outcome, "abandoned")


class PreContextType(StrEnum):
    CIRCUIT_BREAKER = "circuit_breaker"
    RETRY = "retry"
    HELPER = "helper"


class AttemptRecord(BaseModel):
    """One attempt at a task by one provider (seed 003's AttemptRecord)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task_id: str = Field(min_length=1, max_length=500)
    attempt_number: int = Field(ge=1)
    provider: str = Field(min_length=1, max_length=100)
    timestamp: str = ""
    files_created: tuple[str, ...] = ()
    files_updated: tuple[str, ...] = ()
    status: AttemptStatus
    validation_errors: tuple[str, ...] = ()
    exit_reason: str | None = None


@dataclass(frozen=True, slots=True)
class PreContextPolicy:
    """Seed 003's configuration: ENABLE_PRE_CONTEXT_INJECTION, PRE_CONTEXT_MAX_LINES, PRE_CONTEXT_TYPES,
    HELPER_CONTEXT_MAX_ATTEMPTS, PRE_CONTEXT_MAX_FILES (and at most 3 errors per retry context)."""

    enabled: bool = True
    max_lines: int = 10
    types: frozenset[PreContextType] = field(default_factory=lambda: frozenset(PreContextType))
    helper_max_attempts: int = 2
    max_files: int = 3
    max_errors: int = 3
    #: seed 003's token target; over it, file lists and then error texts are shortened until it fits
    max_tokens: int = 100
    #: errors longer than this are cut (None: whole); set while shrinking to the token budget
    max_error_chars: int | None = None

    def __post_init__(self) -> None:
        if self.max_lines < 3:
            raise ValueError("max_lines must leave room for the two delimiter lines and one line of content")
        if self.helper_max_attempts < 1 or self.max_files < 1 or self.max_errors < 1:
            raise ValueError("helper_max_attempts, max_files and max_errors must be at least 1")


def coerce_attempts(raw: Iterable[Any]) -> list[AttemptRecord]:
    """Valid attempts from possibly corrupt data (bad entries are dropped), ordered by attempt number."""
    attempts = []
    if isinstance(raw, str | bytes | dict):  # not a list of attempts at all
        return []
    for entry in raw:
        if isinstance(entry, AttemptRecord):
            attempts.append(entry)
            continue
        try:
            attempts.append(AttemptRecord.model_validate(entry))
        except (ValidationError, TypeError, ValueError):
            continue
    return sorted(attempts, key=lambda a: a.attempt_number)


def _files(files: Sequence[str], limit: int) -> str:
    return ", ".join(f for f in files[:limit] if f)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def _first_error(attempt: AttemptRecord) -> str:
    return attempt.validation_errors[0] if attempt.validation_errors else ""


def _cut(error: str, policy: PreContextPolicy) -> str:
    limit = policy.max_error_chars
    return error if limit is None or len(error) <= limit else error[: max(1, limit - 1)].rstrip() + "…"


def loop_detected(attempts: Sequence[AttemptRecord]) -> bool:
    """The last three attempts failed with the same first error."""
    if len(attempts) < LOOP_LENGTH:
        return False
    errors = {_first_error(a) for a in attempts[-LOOP_LENGTH:]}
    return len(errors) == 1 and errors != {""}


def _bounded(lines: list[str], policy: PreContextPolicy) -> str:
    if len(lines) > policy.max_lines:
        kept = lines[: policy.max_lines - 1]
        while len(kept) > 1 and kept[-1].endswith(":"):  # never a list's heading without its list
            kept.pop()
        lines = [*kept, TRUNCATED_LINE]
    return "\n".join(lines) + "\n"


def _latest_error(attempts: Sequence[AttemptRecord]) -> str:
    return next((_first_error(a) for a in reversed(attempts) if a.validation_errors), "")


def circuit_breaker_context(
    attempts: Sequence[AttemptRecord],
    policy: PreContextPolicy,
    *,
    provider: str | None = None,
    reason: str | None = None,
) -> str:
    """--- PROVIDER SWITCH CONTEXT ---: what the provider that just failed had done.

    The failed provider is the one named (the request's ``failed_provider``), else the last attempt's.
    Its own attempts are described (files of all of them, its latest validation error); a provider
    with no recorded attempt is still named, and the task's other attempts are shown as earlier
    attempts, never as its own.
    """
    if not attempts:
        return ""
    failed = provider or attempts[-1].provider
    own = [a for a in attempts if a.provider == failed]
    scope = own or list(attempts)
    why = reason or next((a.exit_reason for a in reversed(own) if a.exit_reason), None) or "unknown_error"
    label = "Earlier attempts" if not own else "Previous attempt" if len(own) == 1 else "Previous attempts"
    created = _unique(f for a in scope for f in a.files_created)
    updated = _unique(f for a in scope for f in a.files_updated if f not in created)
    lines = ["--- PROVIDER SWITCH CONTEXT ---", f"Previous provider ({failed}) failed: {why}"]
    if created:
        lines.append(f"{label} created: {_files(created, policy.max_files)}")
    if updated:
        lines.append(f"{label} modified: {_files(updated, policy.max_files)}")
    error = _latest_error(scope)
    if error:
        lines.append(f'Validation error: "{_cut(error, policy)}"')
    lines.append(f"Continue from where {failed} left off. Avoid recreating existing files.")
    lines.append(END_LINE)
    return _bounded(lines, policy)


def retry_context(attempts: Sequence[AttemptRecord], policy: PreContextPolicy) -> str:
    """--- RETRY CONTEXT ---: the last attempt's validation failures and what exists already.

    When the last attempt has no validation errors (it crashed, timed out or completed), the line says
    how it ended, and the latest earlier validation failures follow under their own heading, if any.
    """
    if not attempts:
        return ""
    last = attempts[-1]
    number = last.attempt_number + 1
    failing = last if last.validation_errors else next((a for a in reversed(attempts) if a.validation_errors), None)
    if failing is last:
        lines = ["--- RETRY CONTEXT ---", f"Attempt #{number} - Previous validation failures:"]
    else:
        ended = f"Attempt #{number} - previous attempt {last.status.value}"
        lines = ["--- RETRY CONTEXT ---", ended + (f": {last.exit_reason}" if last.exit_reason else "")]
        if failing is not None:
            lines.append(f"Last validation failures (attempt {failing.attempt_number}):")
    if failing is not None:
        lines.extend(f"- {_cut(error, policy)}" for error in failing.validation_errors[: policy.max_errors])
    created = _unique(f for a in attempts for f in a.files_created)
    updated = _unique(f for a in attempts for f in a.files_updated if f not in created)
    if created:
        lines.append(f"Already created: {_files(created, policy.max_files)}")
    if updated:
        lines.append(f"Already modified: {_files(updated, policy.max_files)}")
    if failing is not None:
        lines.append("Focus on fixing validation failures listed above.")
    else:
        lines.append("Continue from the previous attempt's work. Avoid recreating existing files.")
    lines.append(END_LINE)
    return _bounded(lines, policy)


def helper_context(attempts: Sequence[AttemptRecord], policy: PreContextPolicy) -> str:
    """--- HELPER AGENT CONTEXT ---: the last attempts, their files and errors, and a loop warning."""
    if not attempts:
        return ""
    current = attempts[-1].attempt_number + 1
    previous = current - 1
    lines = ["--- HELPER AGENT CONTEXT ---", f"Attempt #{current} ({previous} previous retries) - validation failed"]
    for attempt in attempts[-policy.helper_max_attempts :]:
        touched = _files(_unique([*attempt.files_created, *attempt.files_updated]), policy.max_files)
        line = f"Attempt {attempt.attempt_number}" + (f" touched: {touched}" if touched else "")
        if _first_error(attempt):
            line += f' - error: "{_cut(_first_error(attempt), policy)}"'
        lines.append(line)
    if loop_detected(attempts):
        lines.append(LOOP_LINE)
    lines.append("Generate commands to verify ALL failed criteria from ALL attempts.")
    lines.append(END_LINE)
    return _bounded(lines, policy)


#: error lengths tried, in order, when a context is over its token budget
ERROR_CHAR_STEPS = (80, 48, 24)


def _tighter(policy: PreContextPolicy) -> Iterator[PreContextPolicy]:
    """Ever tighter versions of ``policy`` for the token target: shorter errors, then fewer of them.

    Seed 003 keeps up to ``max_files`` files of each of the last ``helper_max_attempts`` attempts and holds
    the context to its lines; its ~100 tokens are a target, so the errors give way, never the files nor the
    attempts (issue 25: cutting files first left a retry one file per attempt).
    """
    for chars in ERROR_CHAR_STEPS:
        yield replace(policy, max_error_chars=chars)
    yield replace(policy, max_errors=min(policy.max_errors, 1), max_error_chars=ERROR_CHAR_STEPS[-1])


def build_precontext(
    kind: PreContextType,
    raw_attempts: Iterable[Any] | None,
    policy: PreContextPolicy,
    *,
    enabled_for_task: bool | None = None,
    provider: str | None = None,
    reason: str | None = None,
    count_tokens: Callable[[str], int] = estimate_tokens,
) -> str:
    """The pre-context of ``kind`` for a task's attempts; "" when disabled or when there is nothing to say.

    ``enabled_for_task`` is the task's own override (seed 003's ``options.enable_pre_context``).
    Over ``policy.max_tokens`` (by ``count_tokens``) the errors are shortened, then fewer are listed, until
    it fits or nothing more can be shortened; the files and attempts the policy keeps stay (``_tighter``).
    """
    enabled = policy.enabled if enabled_for_task is None else enabled_for_task
    if not enabled or kind not in policy.types or raw_attempts is None:
        return ""
    attempts = coerce_attempts(raw_attempts)

    def build(p: PreContextPolicy) -> str:
        if kind is PreContextType.CIRCUIT_BREAKER:
            return circuit_breaker_context(attempts, p, provider=provider, reason=reason)
        if kind is PreContextType.RETRY:
            return retry_context(attempts, p)
        return helper_context(attempts, p)

    text = build(policy)
    for tighter in _tighter(policy):
        if count_tokens(text) <= policy.max_tokens:
            break
        text = build(tighter)
    return text
