"""The errors a session has seen failing and not yet fixed, and how a run bears on them (pure): which open errors
a passing run closes (:func:`closing`), whether it fixed them or passed by running something else (:func:`fixed`), and
what ran meanwhile that may have changed files (:func:`note_ran`, :func:`rewrote`). :mod:`ctxbus.capture.fixes` walks
a session's steps with these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxbus.capture.checks import changes_files, programs_of, rewrites_files, segments_of
from ctxbus.capture.edits import bare_command, basename
from ctxbus.capture.inner_step import inner_step
from ctxbus.capture.signature import Signature
from ctxbus.capture.steps import EditStep, RunStep, ShellStep, Span, Step
from ctxbus.core.check_commands import BUILD, TEST, is_aggregate
from ctxbus.core.outcome_rules import Verdict


@dataclass
class OpenError:
    """An error seen failing and not yet fixed."""

    signature: Signature
    families: tuple[str, ...]
    kind: str
    toolchain: str | None
    command: str
    span: Span
    hits: int = 1
    edits: list[EditStep] = field(default_factory=list)
    #: commands that rewrote files after it failed (a formatter, ``--fix``, code generation)
    rewrites: list[str] = field(default_factory=list)
    #: a later run of its check no longer showed it (after edits): fixed, once a run of its check passes
    resolved: bool = False
    #: the output of its last failing run (its findings name the files they are in)
    output: str = ""
    #: other commands that ran (and did not fail) since it failed and may have changed files (``cargo sqlx prepare``)
    ran: list[str] = field(default_factory=list)


def covers(error: OpenError, step: RunStep) -> bool:
    return bool(set(error.families) & set(step.all_families))


def compiled_past(error: OpenError, step: RunStep) -> bool:
    """A test run of the toolchain whose build ``error`` failed: it compiles first, so failing on another error it
    shows the build error gone (``swift build`` failed, then ``swift test`` got as far as a failing test)."""
    check = step.run.check
    return error.kind == BUILD and check.kind == TEST and bool(check.toolchain) and error.toolchain == check.toolchain


def closing(open_errors: Sequence[OpenError], step: RunStep) -> list[OpenError]:
    """The open errors a passing run fixes: those of a check it runs, else of its kind, those of the checks a
    whole-check script echoes (``npm run check`` ran ``npm run typecheck``), and (a failed build) of its toolchain (a
    passing ``cargo test`` compiled what ``cargo build`` failed). Another check closes only errors that
    something was changed for since they failed: ``helm template`` passing right after ``helm lint`` failed says
    nothing about the lint error."""
    closed = [e for e in open_errors if covers(e, step)]
    changed = [e for e in open_errors if e.edits or e.rewrites]
    if not closed:
        closed = [e for e in changed if e.kind == step.run.check.kind]
    if any(is_aggregate(f.rsplit(":", 1)[0]) for f in step.all_families):  # ``npm run check``: the scripts it ran
        closed += [e for e in changed if e not in closed and set(e.families) & set(step.echoed_families)]
    if step.run.check.toolchain:  # it compiled: the toolchain's build errors changed for are fixed too
        toolchain = step.run.check.toolchain
        closed += [e for e in changed if e.kind == BUILD and e.toolchain == toolchain and e not in closed]
    return closed


def note_ran(step: Step, open_errors: Sequence[OpenError]) -> None:
    """A command that ran without failing and may have changed files, for the open errors it did not come from."""
    if isinstance(step, RunStep) and step.run.verdict is not Verdict.FAILED:
        command = step.run.command
    elif isinstance(step, ShellStep) and not step.failed:
        command = step.command
    else:
        return
    if not changes_files(command):
        return
    bare = bare_command(command)
    for error in open_errors:
        if not error.resolved and bare not in error.ran and not segments_of(error.command) & segments_of(command):
            error.ran.append(bare)


def rewrote(step: Step) -> str | None:
    """The command of a step that rewrote files in place and succeeded, else None."""
    if isinstance(step, RunStep) and step.run.verdict is Verdict.PASSED and rewrites_files(step.run.command):
        return step.run.command
    if isinstance(step, ShellStep) and not step.failed and rewrites_files(step.command):
        return step.command
    return None


def fixed(error: OpenError, step: RunStep) -> bool:
    """Whether a pass of ``step`` fixed ``error``: files changed since it failed, by the change itself."""
    if error.rewrites and not error.edits:
        return True
    return bool(error.edits) and not passed_by_running_it_otherwise(error, step)


def passed_by_running_it_otherwise(error: OpenError, step: RunStep) -> bool:
    """Whether the pass came from another program (``mvn`` failing on its own version, ``./mvnw`` passing) while the
    error named none of the files edited meanwhile: the command changed, not the code. A script runs the programs
    it echoes (``npm test``: ``> vitest run``), passing or failing."""
    passed = programs_of(step.run.command).union(*(programs_of(e) for e in step.echoed))
    if programs_of(error.command) & passed:  # ``make check`` failed; ``x && make check`` passed
        return False
    if programs_of(inner_step(error.command, error.output) or "") & passed:
        return False
    sig = error.signature
    said = " ".join((*sig.locations, *sig.lines, *sig.identifiers, sig.headline))
    return not any(basename(edit.path) in said for edit in error.edits)
