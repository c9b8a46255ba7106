"""The capture rules: a session's steps -> its lessons (pure).

- **failure_fix**: a check fails with an error (its :class:`~ctxbus.capture.signature.Signature`), files are edited,
  then the same check family (or, with none open, a check of the same kind) passes: one lesson per distinct error
  fixed, however often it was hit before the fix. A failure never fixed, or "fixed" with no edit, is no lesson.
- **episode**: a session that changed files and whose outcome (the outcome rules' :func:`decide` over its checks,
  the user's feedback and the final report) is successful, or unknown but not abandoned: the task, the files, the
  verifying commands. Read-only sessions, small talk, aborted and failed sessions have none.
- **correction**: a prompt after an assistant turn that states a standing rule (:mod:`ctxbus.capture.prompts`).
- **remember**: a prompt starting ``remember:``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ctxbus.capture.checks import check_key, program_of, repeated_keys
from ctxbus.capture.prompts import remembered, rule_in
from ctxbus.capture.signature import Signature, bare_command, basename, gist, quotable, relative, signature_of
from ctxbus.capture.steps import AnswerStep, EditStep, InterruptStep, PromptStep, RunStep, ShellStep, Span, Step
from ctxbus.contract.payloads import Outcome
from ctxbus.core.check_commands import BUILD, Check
from ctxbus.core.feedback_text import read_assistant_report, read_feedback
from ctxbus.core.outcome_rules import AssistantReport, Evidence, Feedback, Verdict, decide

#: how much of a prompt an episode's task quotes
TASK_CHARS = 300
FOLLOW_UP_CHARS = 160
MAX_FOLLOW_UPS = 3
MAX_FILES = 8
MAX_COMMANDS = 3
#: prompts that give the session up
_ABANDON = (
    "forget it",
    "never mind",
    "nevermind",
    "let's stop",
    "lets stop",
    "abandon",
    "give up",
    "drop it",
    "revert",
)


#: a prompt that only says to go on (after a pause, a compaction, a question): no task of its own
_BARE_GO_ON = re.compile(
    r"^\s*(?:please\s+)?(?:continue|go on|go ahead|proceed|carry on|keep going|resume|next|ok(?:ay)?|yes|yep|sure|"
    r"do it|sounds good|thanks?(?: you)?|lgtm|y)\s*(?:please)?[.!]*\s*$",
    re.I,
)


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


@dataclass(frozen=True, slots=True)
class Lesson:
    rule: RuleName
    span: Span
    fact: Fix | Episode | Said


@dataclass
class _Open:
    """An error seen failing and not yet fixed."""

    signature: Signature
    families: tuple[str, ...]
    kind: str
    toolchain: str | None
    command: str
    span: Span
    hits: int = 1
    edits: list[EditStep] = field(default_factory=list)
    #: a later run of its check no longer showed it (after edits): fixed, once a run of its check passes
    resolved: bool = False


def _edits_summary(edits: Sequence[EditStep], cwd: str | None) -> tuple[tuple[str, str], ...]:
    by_path: dict[str, list[str]] = {}
    for edit in edits:
        path = relative(edit.path, cwd)
        entry = by_path.setdefault(path, [])
        if quotable(path) and edit.tool != "write":
            piece = gist(edit.old, edit.new)
            if piece and piece not in entry:
                entry.append(piece)
    return tuple((path, " / ".join(pieces)[:300]) for path, pieces in list(by_path.items())[:MAX_FILES])


def _covers(error: _Open, step: RunStep) -> bool:
    return bool(set(error.families) & set(step.all_families))


def _closing(open_errors: Sequence[_Open], step: RunStep) -> list[_Open]:
    """The open errors a passing run fixes: those of a check it runs, else of its kind, else (a failed build) of its
    toolchain (a passing ``cargo test`` compiled what ``cargo build`` failed)."""
    closing = [e for e in open_errors if _covers(e, step)]
    if not closing:
        closing = [e for e in open_errors if e.kind == step.run.check.kind]
    if not closing and step.run.check.toolchain:
        closing = [e for e in open_errors if e.kind == BUILD and e.toolchain == step.run.check.toolchain]
    return closing


TASK_CONTEXT_CHARS = 160
#: the kind (and family prefix) of an error opened by a command that is a check by its repetition
REPEATED = "repeated"


def failure_fixes(steps: Sequence[Step], cwd: str | None = None) -> list[Lesson]:
    """One lesson per distinct error that failed, was edited for and then passed (or vanished from a later run of
    its check that failed on something else, and that check passed in the end)."""
    prompts = [s.text for s in steps if isinstance(s, PromptStep) and remembered(s.text) is None]
    task = " ".join(prompts[0].split())[:TASK_CONTEXT_CHARS] if prompts else ""
    open_errors: list[_Open] = []
    lessons: list[Lesson] = []
    for step in steps:
        if isinstance(step, EditStep):
            for error in open_errors:
                if not error.resolved:
                    error.edits.append(step)
        elif isinstance(step, RunStep) and step.run.verdict is Verdict.FAILED:
            sig = signature_of(step.output, step.run.detail)
            same = next((e for e in open_errors if _covers(e, step) and e.signature.same_error(sig)), None)
            for error in open_errors:  # gone from a later run of its own check, after edits: it was fixed
                if error is not same and not error.resolved and error.edits and _covers(error, step):
                    error.resolved = True
            if same is not None:
                same.hits += 1
                same.command = step.run.command
                same.resolved = False
            else:
                check = step.run.check
                open_errors.append(
                    _Open(sig, step.all_families, check.kind, check.toolchain, step.run.command, step.span)
                )
        elif isinstance(step, RunStep) and step.run.verdict is Verdict.PASSED:
            for error in _closing(open_errors, step):
                open_errors.remove(error)
                if error.edits and not _passed_by_running_it_otherwise(error, step.run.command):
                    fix = Fix(
                        error.signature,
                        error.command,
                        error.hits,
                        _edits_summary(error.edits, cwd),
                        step.run.command,
                        task,
                    )
                    lessons.append(Lesson(RuleName.FAILURE_FIX, Span(error.span.start, step.span.end), fix))
        elif isinstance(step, ShellStep):
            lessons.extend(_repeated(step, open_errors, cwd, task))
    return lessons


def _passed_by_running_it_otherwise(error: _Open, command: str) -> bool:
    """Whether the pass came from another program (``mvn`` failing on its own version, ``./mvnw`` passing) while the
    error named none of the files edited meanwhile: the command changed, not the code."""
    if program_of(error.command) == program_of(command):
        return False
    sig = error.signature
    said = " ".join((*sig.locations, *sig.lines, *sig.identifiers, sig.headline))
    return not any(basename(edit.path) in said for edit in error.edits)


def _repeated(step: ShellStep, open_errors: list[_Open], cwd: str | None, task: str) -> list[Lesson]:
    """A command no check list knows, as a check by its repetition: failing, it opens an error keyed by its
    program and subcommand; passing after edits, it fixes the errors its own earlier runs opened."""
    families = tuple(f"{REPEATED}:{key}" for key in repeated_keys(step.command))
    if not families:
        return []
    if step.failed:
        sig = signature_of(step.output)
        if not sig.identifiers and not sig.headline:
            return []  # it said nothing that states an error: nothing to learn from its fix
        same = next((e for e in open_errors if set(families) & set(e.families) and e.signature.same_error(sig)), None)
        if same is not None:
            same.hits += 1
            same.command = step.command
            same.resolved = False
        else:
            open_errors.append(_Open(sig, families, REPEATED, None, step.command, step.span))
        return []
    lessons = []
    for error in [e for e in open_errors if e.kind == REPEATED and set(families) & set(e.families)]:
        open_errors.remove(error)
        if error.edits:
            fix = Fix(error.signature, error.command, error.hits, _edits_summary(error.edits, cwd), step.command, task)
            lessons.append(Lesson(RuleName.FAILURE_FIX, Span(error.span.start, step.span.end), fix))
    return lessons


def _evidence(steps: Sequence[Step]) -> list[Evidence]:
    found: list[Evidence] = []
    answered = False
    final: tuple[int, str] | None = None
    for index, step in enumerate(steps):
        if isinstance(step, RunStep):
            found.append(step.run)
            if step.run.verdict is Verdict.PASSED:  # ``ruff check && mypy`` passing passed both checks
                main = check_key(step.run.check)
                found.extend(
                    replace(step.run, key=f"{step.run.key}:{key}", check=Check(*key.rsplit(":", 1)))
                    for key in step.all_families
                    if key != main
                )
        elif isinstance(step, AnswerStep):
            answered, final = True, (len(found), step.text)
        elif isinstance(step, PromptStep) and answered and remembered(step.text) is None and rule_in(step.text) is None:
            read = read_feedback(step.text)
            if read is not None:
                found.append(Feedback(f"prompt:{index}", *read))
    if final is not None:
        report = read_assistant_report(final[1])
        if report is not None:
            found.insert(final[0], AssistantReport(f"answer:{final[0]}", *report))
    return found


def _abandoned(steps: Sequence[Step]) -> bool:
    """The session ends interrupted, or its last prompt gives the work up."""
    meaningful = [s for s in steps if not isinstance(s, AnswerStep)]
    if meaningful and isinstance(meaningful[-1], InterruptStep):
        return True
    prompts = [s for s in steps if isinstance(s, PromptStep)]
    return bool(prompts) and any(word in prompts[-1].text.lower()[:120] for word in _ABANDON)


RESULT_CHARS = 400


#: an answer this short says no result ("You're welcome.", "Done!"): the report is an earlier, longer one
REPORT_MIN_WORDS = 6


def _reporting(answers: Sequence[str]) -> str:
    """The answer that reports the session's result: the last one of some length, else the last."""
    return next((a for a in reversed(answers) if len(a.split()) >= REPORT_MIN_WORDS), answers[-1])


def _summary(answer: str) -> str:
    """The head of the last answer, whole sentences where they fit."""
    text = " ".join(answer.replace("`", "").split())
    if len(text) <= RESULT_CHARS:
        return text
    cut = text[:RESULT_CHARS]
    end = max(cut.rfind(". "), cut.rfind("; "))
    return cut[: end + 1] if end > RESULT_CHARS // 3 else cut


def _worked_after_last_prompt(steps: Sequence[Step]) -> bool:
    """With no verdict, the work must answer the last prompt: files changed after it and an answer given (a
    session that ends on a complaint nobody acted on is not done)."""
    last = max((i for i, s in enumerate(steps) if isinstance(s, PromptStep)), default=-1)
    after = steps[last + 1 :]
    return any(isinstance(s, EditStep) for s in after) and any(isinstance(s, AnswerStep) for s in after)


def episode(steps: Sequence[Step], cwd: str | None = None) -> Lesson | None:
    """The session as one past-session lesson, or None (no change made, failed, abandoned)."""
    edits = [s for s in steps if isinstance(s, EditStep)]
    tasks = [
        s for s in steps if isinstance(s, PromptStep) and remembered(s.text) is None and read_feedback(s.text) is None
    ]
    if not edits or not tasks or _abandoned(steps):
        return None
    decision = decide(_evidence(steps))
    if decision.outcome not in (Outcome.SUCCESSFUL, Outcome.UNKNOWN):
        return None
    if decision.outcome is Outcome.UNKNOWN and not _worked_after_last_prompt(steps):
        return None
    files = tuple(dict.fromkeys(relative(e.path, cwd) for e in edits))[:MAX_FILES]
    passed = [bare_command(s.run.command) for s in steps if isinstance(s, RunStep) and s.run.verdict is Verdict.PASSED]
    commands = tuple(dict.fromkeys(reversed(passed)))[:MAX_COMMANDS]
    worded = [t for t in tasks if not _BARE_GO_ON.match(t.text)] or tasks
    first = worded[0]
    follow_ups = tuple(" ".join(t.text.split())[:FOLLOW_UP_CHARS] for t in worded[1:] if rule_in(t.text) is None)[
        :MAX_FOLLOW_UPS
    ]
    answers = [s.text for s in steps if isinstance(s, AnswerStep)]
    fact = Episode(
        " ".join(first.text.split())[:TASK_CHARS],
        follow_ups,
        files,
        commands,
        decision.outcome,
        decision.rules[0] if decision.rules else "",
        _summary(_reporting(answers)) if answers else "",
    )
    spans = [s.span for s in steps if s.span.start is not None]
    span = Span(spans[0].start, spans[-1].end) if spans else Span()
    return Lesson(RuleName.EPISODE, span, fact)


def _situation(before: Sequence[Step], cwd: str | None) -> str:
    """What the assistant did last before a prompt: its last command, else the files it last edited."""
    for step in reversed(before):
        if isinstance(step, PromptStep):
            return ""
        if isinstance(step, ShellStep):
            return f"`{bare_command(step.command)}`"
        if isinstance(step, RunStep):
            return f"`{bare_command(step.run.command)}`"
        if isinstance(step, EditStep):
            return f"editing {relative(step.path, cwd)}"
    return ""


def said(steps: Sequence[Step], cwd: str | None = None) -> list[Lesson]:
    """``remember:`` prompts and corrections stating a standing rule after an assistant turn."""
    lessons: list[Lesson] = []
    for index, step in enumerate(steps):
        if not isinstance(step, PromptStep):
            continue
        text = remembered(step.text)
        if text is not None:
            lessons.append(Lesson(RuleName.REMEMBER, step.span, Said(text, negative=False)))
            continue
        if step.after_answer:
            rule = rule_in(step.text)
            if rule is not None:
                said_after = _situation(steps[:index], cwd)
                lessons.append(Lesson(RuleName.CORRECTION, step.span, Said(rule.quote, rule.negative, said_after)))
    return lessons


def lessons_of(steps: Sequence[Step], cwd: str | None = None) -> list[Lesson]:
    """Every lesson of a session's steps, in rule order."""
    found = failure_fixes(steps, cwd)
    whole = episode(steps, cwd)
    if whole is not None:
        found.append(whole)
    return found + said(steps, cwd)


def basenames(paths: Sequence[str]) -> list[str]:
    return [basename(p) for p in paths]
