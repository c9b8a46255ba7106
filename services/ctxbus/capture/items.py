"""Lessons -> memory items (pure): deterministic ids, the user's or the tools' words, provenance, captured
conviction, and the one call that redacts them before anything leaves (``redact``, injected).

Ids derive from what the lesson is, not when it was seen: the same error fixed in the same file, the same rule, the
same remembered text, in another session, is the same id, which ingestion consolidates (occurrences + 1,
:mod:`ctxbus.memory.consolidate`). An episode's id is its session's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ctxbus.capture.edits import bare_command, basename
from ctxbus.capture.lessons import Episode, Fix, Lesson, RuleName, Said
from ctxbus.memory.consolidate import CAPTURED_CONFIDENCE
from ctxbus.memory.model import (
    CAPTURED_SOURCE,
    MAX_CONTENT_CHARS,
    FileRef,
    MemoryItem,
    MemoryKind,
    Outcome,
    Provenance,
    Severity,
    content_hash,
)

#: text -> the same text with secrets and private spans removed; the integrator wires the real redaction here
RedactText = Callable[[str], str]
#: path (as the lesson names it) -> (sha256, commit) of the file now, or None when unreadable
FileHash = Callable[[str], tuple[str | None, str | None] | None]
#: a correction is the user's own word: a little more conviction than a rule inferred from tools
CORRECTION_CONFIDENCE = 0.47
#: ``remember:`` is explicit: it starts where an import does
REMEMBER_CONFIDENCE = 0.5
TITLE_CHARS = 200
CAPTURED_TAG = "captured"


def no_redaction(text: str) -> str:
    """The default ``redact``: the text unchanged (the integrator wires the secret redaction in its place)."""
    return text


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What the capture knows about the session beside its steps."""

    project: str
    session_id: str
    hook_event: str
    cwd: str | None
    now: datetime


def item_id(project: str, rule: str, key: str) -> str:
    digest = hashlib.sha256("\x1f".join((project, rule, key)).encode("utf-8", "replace")).hexdigest()[:24]
    return f"cap-{rule}-{digest}"


def _code(command: str) -> str:
    return f"`{command}`"


def _fix_text(fix: Fix) -> tuple[str, str, str, str]:
    """(title, content, key insight, lesson) of a failure fix."""
    sig = fix.signature
    names = ", ".join(sig.identifiers) or "an error"
    files = [path for path, _ in fix.edits]
    ran = ", ".join(_code(bare_command(c)) for c in fix.rewrites)
    where = ", ".join(basename(f) for f in files[:3]) if files else f"by running {ran}"
    # fixed by running a formatter or generator: the files the error named say where
    named = ", ".join(dict.fromkeys(basename(p) for p in sig.locations[:3]))
    at = f" in {named}" if named else ""
    title = f"Fix for {sig.key} in {where}" if files else f"Fix for {sig.key}{at} {where}"
    step = f" in {_code(bare_command(fix.failed_step))}" if fix.failed_step else ""
    parts = [f"{_code(bare_command(fix.failed_command))} failed{step} with {names}"]
    stated = [line for line in (sig.lines or (sig.headline,)) if line and line not in names]
    if stated:
        parts[0] += ": " + " | ".join(stated)
    if fix.hits > 1:
        parts.append(f"(hit {fix.hits} times before the fix)")
    changes = "; ".join(f"{path} ({piece})" if piece else path for path, piece in fix.edits)
    done = [f"editing {changes}"] if fix.edits else []
    done += [f"running {ran}"] if fix.rewrites else []
    parts.append(f"Fixed by {' and '.join(done)}.")
    parts.append(f"Verified: {_code(bare_command(fix.verified_by))} passed.")
    if fix.task:
        parts.append(f"(While: {fix.task})")
    insight = f"{sig.key}: fixed in {', '.join(files[:3])}" if files else f"{sig.key}: fixed by running {ran}"
    pieces = [piece for _, piece in fix.edits if piece]
    lesson = (
        f"When {sig.key} appears, look at {', '.join(files[:3])}" + (f": {pieces[0]}" if pieces else "")
        if files
        else f"When {sig.key} appears, run {ran}"
    )
    return title, " ".join(parts), insight, lesson


def _episode_text(episode: Episode) -> tuple[str, str]:
    title = f"Past session: {episode.task[:120]}"
    parts = [f"Past session ({episode.outcome.value}). Task: {episode.task}"]
    if episode.follow_ups:
        parts.append("Then: " + " | ".join(episode.follow_ups))
    parts.append(f"Changed: {', '.join(episode.files)}.")
    if episode.commands:
        parts.append("Verified by " + ", ".join(_code(c) for c in episode.commands) + ".")
    if episode.result:
        parts.append(f"Result: {episode.result}")
    return title, " ".join(parts)


def _key(lesson: Lesson, facts: SessionFacts) -> str:
    fact = lesson.fact
    if isinstance(fact, Fix):
        first_file = min((basename(p) for p, _ in fact.edits), default="")
        return f"{fact.signature.key}\x1f{first_file}"
    if isinstance(fact, Episode):
        return facts.session_id
    return content_hash(fact.quote)


def _files(paths: list[str], file_hash: FileHash | None) -> tuple[FileRef, ...]:
    refs = []
    for path in dict.fromkeys(paths):
        known = file_hash(path) if file_hash is not None else None
        refs.append(FileRef(path=path[:1000], sha256=known[0] if known else None, commit=known[1] if known else None))
    return tuple(refs)


def item_of(
    lesson: Lesson, facts: SessionFacts, *, redact: RedactText = no_redaction, file_hash: FileHash | None = None
) -> MemoryItem:
    """The memory item of a lesson, redacted (every text field goes through ``redact``)."""
    fact = lesson.fact
    extra: dict[str, object] = {}
    paths: list[str] = []
    if isinstance(fact, Fix):
        title, content, insight, learned = _fix_text(fact)
        kind, confidence = MemoryKind.LEARNING, CAPTURED_CONFIDENCE
        extra = {"outcome": Outcome.SUCCESSFUL, "key_insight": insight, "lesson_learned": learned}
        paths = [path for path, _ in fact.edits]
        tags: tuple[str, ...] = (CAPTURED_TAG, "failure-fix")
    elif isinstance(fact, Episode):
        title, content = _episode_text(fact)
        kind, confidence = MemoryKind.ATTEMPT, CAPTURED_CONFIDENCE
        extra = {"outcome": fact.outcome}
        paths = list(fact.files)
        tags = (CAPTURED_TAG, "episode")
    else:
        assert isinstance(fact, Said)
        if lesson.rule is RuleName.REMEMBER:
            title, content = fact.quote[:TITLE_CHARS], fact.quote
            kind, confidence = MemoryKind.PRINCIPLE, REMEMBER_CONFIDENCE
            tags = (CAPTURED_TAG, "remember")
        else:
            title, content = fact.quote[:TITLE_CHARS], f'The user said: "{fact.quote}"'
            if fact.after:
                content += f" (after {fact.after})"
            if fact.task:
                content += f" (While: {fact.task})"
            kind = MemoryKind.WARNING if fact.negative else MemoryKind.PRINCIPLE
            confidence = CORRECTION_CONFIDENCE
            tags = (CAPTURED_TAG, "correction")
            if fact.negative:
                extra = {"severity": Severity.MEDIUM, "mitigation": fact.quote}
    for name in ("key_insight", "lesson_learned", "mitigation"):
        value = extra.get(name)
        if isinstance(value, str):
            extra[name] = redact(value)[:2000]
    return MemoryItem(
        id=item_id(facts.project, lesson.rule.value, _key(lesson, facts)),
        project=facts.project,
        kind=kind,
        title=redact(title)[:TITLE_CHARS],
        content=redact(content)[:MAX_CONTENT_CHARS],
        tags=tags,
        source=CAPTURED_SOURCE,
        confidence=confidence,
        session_id=facts.session_id,
        provenance=Provenance(
            session_id=facts.session_id,
            hook_event=facts.hook_event,
            transcript_start=lesson.span.start,
            transcript_end=lesson.span.end,
            rule=lesson.rule.value,
            captured_at=facts.now,
        ),
        files=_files(paths, file_hash),
        created_at=facts.now,
        updated_at=facts.now,
        **extra,
    )
