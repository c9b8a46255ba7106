"""The failure_fix rule (pure): a check fails with an error (its :class:`~ctxbus.capture.signature.Signature`),
files are edited, then the same check family (or, with none open, a check of the same kind) passes: one lesson per
distinct error fixed, however often it was hit before the fix. A failure never fixed, "fixed" with no edit, or passed
by running another program while the error named none of the edited files, is no lesson. A command no check list
knows is a check by its repetition (:func:`ctxbus.capture.checks.repeated_keys`). Which open errors a pass closes, and
whether it fixed them, is :mod:`ctxbus.capture.open_errors`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ctxbus.capture.checks import (
    RUNNERS,
    changes_files,
    formatter_check,
    only_rewrites,
    program_of,
    repeated_keys,
    rewrites_files,
    segments_of,
)
from ctxbus.capture.edits import gist, quotable, relative
from ctxbus.capture.error_patterns import WRAPPER_EXCEPTIONS
from ctxbus.capture.inner_step import inner_step
from ctxbus.capture.lessons import Fix, Lesson, RuleName
from ctxbus.capture.open_errors import OpenError, closing, compiled_past, covers, fixed, note_ran, rewrote
from ctxbus.capture.prompts import bare_go_on, rejects, remembered
from ctxbus.capture.signature import Signature, findings_by_file, signature_of, unformatted
from ctxbus.capture.steps import EditStep, PromptStep, RunStep, ShellStep, Span, Step, resumed_task_of
from ctxbus.core.check_commands import TEST, is_aggregate
from ctxbus.core.outcome_rules import Verdict

#: files an edit summary names
MAX_FILES = 8


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


TASK_CONTEXT_CHARS = 160
#: a finding that says its severity right after its place: ``src/a.clj:22:7: error: Unresolved symbol: x``
_SEVERITY_AT = re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:error|warning)\b:?\s+\S", re.I)
#: the kind (and family prefix) of an error opened by a command that is a check by its repetition
REPEATED = "repeated"


def session_task(steps: Sequence[Step]) -> str:
    """The session's task as its lessons quote it: its first worded prompt (else the task a resumed session's summary
    names, else its first prompt), whitespace folded, at most TASK_CONTEXT_CHARS."""
    prompts = [s.text for s in steps if isinstance(s, PromptStep) and remembered(s.text) is None]
    worded = [p for p in prompts if not bare_go_on(p)]
    said = worded[0] if worded else resumed_task_of(steps) or (prompts[0] if prompts else "")
    return " ".join(said.split())[:TASK_CONTEXT_CHARS]


def failure_fixes(steps: Sequence[Step], cwd: str | None = None) -> list[Lesson]:
    """One lesson per distinct error that failed, was edited for and then passed (or vanished from a later run of
    its check that failed on something else, and that check passed in the end)."""
    task = session_task(steps)
    open_errors: list[OpenError] = []
    lessons: list[Lesson] = []
    #: the errors just fixed (nothing edited or failed since, the user has not spoken), with their lessons; and fixes
    #: the user rejected, open again
    recent: list[tuple[OpenError, list[Lesson]]] = []
    rejected: list[tuple[OpenError, list[Lesson]]] = []
    for step in steps:
        if isinstance(step, PromptStep):
            if rejects(step.text):  # "no, don't paper over it ...": what follows replaces the fix just verified
                _reopen(recent, lessons, open_errors, rejected)
            recent = []
            continue
        rewriter = rewrote(step)
        if rewriter is not None:  # a formatter or code generator changed files: an edit (its own verdict follows)
            for error in open_errors:
                if not error.resolved and rewriter not in error.rewrites:
                    error.rewrites.append(rewriter)
        if isinstance(step, EditStep) or (isinstance(step, RunStep) and step.run.verdict is Verdict.FAILED):
            recent = []  # a rejection now is of this work, not of the fix before it
        if isinstance(step, EditStep):
            for error in open_errors:
                if not error.resolved:
                    error.edits.append(step)
        elif isinstance(step, RunStep) and step.run.verdict is Verdict.FAILED:
            _failed(step, open_errors)
        elif isinstance(step, RunStep) and step.run.verdict is Verdict.PASSED:
            if rewriter is not None and only_rewrites(rewriter):
                continue  # it changed files; a later run of the check says whether that fixed anything
            for error in closing(open_errors, step):
                open_errors.remove(error)
                if fixed(error, step):
                    learned = _lessons(error, step.run.command, step.span, cwd, task)
                    lessons.extend(learned)
                    recent.append((error, learned))
                    rejected = [(e, said) for e, said in rejected if e is not error]  # replaced
            # ``pint --test && pest``: a segment no list knows verifies what its own earlier runs opened
            lessons.extend(_repeated(ShellStep(step.run.command, step.span), open_errors, cwd, task, same_only=True))
        elif isinstance(step, ShellStep):
            lessons.extend(_repeated(step, open_errors, cwd, task))
        note_ran(step, open_errors)
    # a rejected fix that nothing replaced (the user asked something else) stays what the session learned
    lessons.extend(lesson for _, said in rejected for lesson in said)
    return lessons


def _failed(step: RunStep, open_errors: list[OpenError]) -> None:
    """A failing run of a check: the error it repeats seen again (its part a rerun no longer shows split off as
    fixed), or a new error opened."""
    sig = signature_of(step.output, step.run.detail)
    same = next((e for e in open_errors if covers(e, step) and e.signature.same_error(sig)), None)
    _resolve_gone(open_errors, step, sig, same)
    if same is None:
        check = step.run.check
        error = OpenError(sig, step.all_families, check.kind, check.toolchain, step.run.command, step.span)
        error.output = step.output
        open_errors.append(error)
        return
    # (a run that also rewrote files, ``standardrb --fix``: what is gone may be that command's doing)
    fixed_part = None if rewrites_files(step.run.command) else _fixed_part(same, sig, step.output)
    if fixed_part is not None:
        open_errors.append(fixed_part)  # fixed by the edits so far: a lesson once a run of its check passes
        same.edits, same.rewrites, same.signature = [], [], sig
    same.hits += 1
    same.signature = same.signature.then(sig)
    same.command = step.run.command
    same.resolved = False
    same.output = step.output
    same.ran = []  # what ran before it failed again did not fix it


def _reopen(
    recent: list[tuple[OpenError, list[Lesson]]],
    lessons: list[Lesson],
    open_errors: list[OpenError],
    rejected: list[tuple[OpenError, list[Lesson]]],
) -> None:
    """The fixes just verified, rejected by the user: their lessons withdrawn and their errors open again, with
    nothing done for them yet (kept in ``rejected``: restored if nothing replaces them)."""
    for error, said in recent:
        lessons[:] = [lesson for lesson in lessons if lesson not in said]
        error.edits, error.rewrites, error.resolved, error.ran = [], [], False, []
        open_errors.append(error)
        rejected.append((error, said))


def _fixed_part(error: OpenError, sig: Signature, output: str) -> OpenError | None:
    """The part of a compiler's or linter's error a rerun no longer shows after edits (``TS2305`` gone, ``TS2307``
    left): fixed by those edits, a lesson of its own; None when the rerun shows all of it, nothing was edited, or the
    check is a test run (a test's failures change with each attempt)."""
    if error.kind == TEST or not error.edits or error.resolved:
        return None
    gone = [i for i in error.signature.identifiers if i not in sig.identifiers and i not in output]
    if not gone or len(gone) == len(error.signature.identifiers) or set(gone) <= WRAPPER_EXCEPTIONS:
        return None
    return replace(
        error,
        signature=error.signature.only(gone),
        edits=list(error.edits),
        rewrites=list(error.rewrites),
        resolved=True,
        ran=list(error.ran),
    )


def _resolve_gone(open_errors: list[OpenError], step: RunStep, sig: Signature, same: OpenError | None) -> None:
    """The open errors a failing run no longer shows (``sig`` is what it shows, ``same`` the open error it repeats):
    gone from a later run of their own check after edits, they were fixed (once a run of the check passes)."""
    for error in list(open_errors):
        if error is same or error.resolved:
            continue
        if not covers(error, step):
            if error.edits and compiled_past(error, step) and not error.signature.same_error(sig):
                error.resolved = True
            continue
        if error.edits:
            error.resolved = True
        elif segments_of(error.command) & segments_of(step.run.command):
            # the same command no longer shows it and nothing was edited for it: a command run meanwhile fixed it (a
            # file restored, a cache generated), else it went by itself (a flake); the edits that follow are for what
            # the check shows now (``git checkout main -- .prettierignore && npm run lint``: the line's own other
            # commands too)
            ran = error.ran + sorted(
                seg for seg in segments_of(step.run.command) - segments_of(error.command) if changes_files(seg)
            )
            if ran:
                error.rewrites = list(dict.fromkeys(ran))
                error.resolved = True
            else:
                open_errors.remove(error)


def _lessons(error: OpenError, verified_by: str, span: Span, cwd: str | None, task: str) -> list[Lesson]:
    """The lessons of a fixed error: one, or one per file when the run's findings were in several files and each
    was fixed in its own (``tsc`` reporting TS2304 in a controller and TS2322 in a service: two things learned)."""
    return [_lesson(part, verified_by, span, cwd, task) for part in _per_file(error, cwd) or [error]]


def _same_file(named: str, edited: str, cwd: str | None) -> bool:
    named = relative(named, cwd)
    return named == edited or named.endswith("/" + edited) or edited.endswith("/" + named)


def _per_file(error: OpenError, cwd: str | None) -> list[OpenError]:
    """The error split by the edited files its findings name, when there are two or more (else nothing). A failing
    test names the test and the frames it passed through, not the files of its fix: tests are never split. Edits of
    files no finding names go with the first part."""
    # (a whole-check script's failure may be a build's or a linter's: ``deno task ci`` failing on two type errors)
    if error.kind == TEST and not any(is_aggregate(f.rsplit(":", 1)[0]) for f in error.families):
        return []
    edited = list(dict.fromkeys(relative(e.path, cwd) for e in error.edits))
    groups: dict[str, list[str]] = {}
    for named, lines in findings_by_file(error.output).items():
        path = next((p for p in edited if _same_file(named, p, cwd)), None)
        if path is not None:
            groups.setdefault(path, []).extend(line for line in lines if line not in groups.get(path, ()))
    # (paths, lines, the first group's signature): the same error in two files is one lesson
    merged: list[tuple[list[str], list[str], Signature]] = []
    for path, lines in groups.items():
        sig = signature_of("\n".join(lines))
        # an error of its own names its code or rule, or says it is an error or a warning where it is
        # (``db.clj:4:5: warning: namespace ... is required but never used``); lines that say neither only point
        # there (the rule was on the line before) or are style notes (``Warning: Eta reduce``): they go with the first
        stated = bool(sig.identifiers) or any(_SEVERITY_AT.match(line) for line in lines)
        twin = next((m for m in merged if not stated or m[2].same_error(sig)), None)
        if twin is None:
            merged.append(([path], list(lines), sig))
        else:
            twin[0].append(path)
            twin[1].extend(lines)
    if len(merged) < 2:
        return []
    rest = [e for e in error.edits if relative(e.path, cwd) not in groups]
    return [
        replace(
            error,
            signature=signature_of("\n".join(lines)) if len(paths) > 1 else sig,
            edits=[e for e in error.edits if relative(e.path, cwd) in paths] + (rest if index == 0 else []),
        )
        for index, (paths, lines, sig) in enumerate(merged)
    ]


def _lesson(error: OpenError, verified_by: str, span: Span, cwd: str | None, task: str) -> Lesson:
    edits = _edits_summary(error.edits, cwd)
    inner = inner_step(error.command, error.output) or ""
    fix = Fix(error.signature, error.command, error.hits, edits, verified_by, task, tuple(error.rewrites), inner)
    return Lesson(RuleName.FAILURE_FIX, Span(error.span.start, span.end), fix)


def _repeated(
    step: ShellStep, open_errors: list[OpenError], cwd: str | None, task: str, *, same_only: bool = False
) -> list[Lesson]:
    """A command no check list knows, as a check by its repetition: failing, it opens an error keyed by its
    program and subcommand; passing after edits, it fixes the errors its own earlier runs opened (``same_only``: a
    line that also runs a known check verifies only the very commands it repeats, not others of their program)."""
    families = tuple(f"{REPEATED}:{key}" for key in repeated_keys(step.command))
    if not families or (not step.failed and only_rewrites(step.command)):
        return []  # looks at nothing, or only changed files: no verdict on an error
    if step.failed:
        sig = signature_of(step.output)
        if not sig.identifiers and not sig.headline and formatter_check(step.command):
            sig = unformatted(program_of(step.command), step.output)
        if not sig.identifiers and not sig.headline:
            return []  # it said nothing that states an error: nothing to learn from its fix
        same = next((e for e in open_errors if set(families) & set(e.families) and e.signature.same_error(sig)), None)
        if same is not None:
            same.hits += 1
            same.command = step.command
            same.resolved = False
            same.output = step.output
        else:
            open_errors.append(OpenError(sig, families, REPEATED, None, step.command, step.span, output=step.output))
        return []
    repeated = [e for e in open_errors if e.kind == REPEATED]
    closed = [e for e in repeated if set(families) & set(e.families)]
    if not closed and not same_only:  # ``sbt "testOnly X"`` failed, ``sbt test`` passed: the same tool, wider
        programs = {_program(f) for f in families} - RUNNERS
        # (only an error something was changed for: ``console doctrine:migrations:status`` passing right after
        # ``console doctrine:migrations:migrate`` failed says nothing about the migration)
        closed = [e for e in repeated if (e.edits or e.rewrites) and programs & {_program(f) for f in e.families}]
    lessons = []
    for error in closed:
        open_errors.remove(error)
        if error.edits or error.rewrites:
            lessons.extend(_lessons(error, step.command, step.span, cwd, task))
    return lessons


def _program(family: str) -> str:
    """The program of a repeated command's family (``repeated:sbt test`` -> ``sbt``)."""
    return family.removeprefix(f"{REPEATED}:").split(" ", 1)[0]
