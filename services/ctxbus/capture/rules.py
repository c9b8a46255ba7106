"""The capture rules: a session's steps -> its lessons (pure).

- **failure_fix**: a check fails, files are edited, the check passes (:mod:`ctxbus.capture.fixes`).
- **episode**: a session that changed files and whose outcome (the outcome rules' :func:`decide` over its checks,
  the user's feedback and the final report) is successful, or unknown but not abandoned: the task, the files, the
  verifying commands. Read-only sessions, small talk, aborted and failed sessions have none.
- **correction**: a prompt after an assistant turn that states a standing rule (:mod:`ctxbus.capture.prompts`).
- **remember**: a prompt starting ``remember:``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ctxbus.capture.checks import check_key, repeated_keys
from ctxbus.capture.edits import bare_command, basename, relative
from ctxbus.capture.fixes import MAX_FILES, failure_fixes, session_task
from ctxbus.capture.inner_step import inner_step
from ctxbus.capture.lessons import Episode, Lesson, RuleName, Said
from ctxbus.capture.prompts import bare_go_on, remembered, rule_in
from ctxbus.capture.signature import signature_of
from ctxbus.capture.steps import (
    AnswerStep,
    EditStep,
    InterruptStep,
    PromptStep,
    RunStep,
    ShellStep,
    Span,
    Step,
    resumed_task_of,
)
from ctxbus.contract.payloads import Outcome
from ctxbus.core.check_commands import Check, check_of_command, is_aggregate
from ctxbus.core.feedback_text import read_assistant_report, read_feedback
from ctxbus.core.outcome_rules import AssistantReport, CheckRun, Evidence, Feedback, Verdict, decide

#: how much of a prompt an episode's task quotes
TASK_CHARS = 300
FOLLOW_UP_CHARS = 160
MAX_FOLLOW_UPS = 3
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
    "leave it,",
    "leave it for now",
    "let's leave it",
)


#: words that ask for more work after a revert ("revert that and use X instead", "revert it, then run Y")
_ASKS_MORE = re.compile(r"\b(?:then|instead|run|use|fix|try|do it|rewrite|add|make)\b")

#: the user doing it themselves, just before such a word ("I'll fix it", "we will run it")
_SELF = re.compile(r"\b(?:i'll|i will|i'd|i can|we'll|we will|let me)\s+(?:\w+\s+)?$")

#: the kind of a check by repetition, as evidence (neither a test nor a build to the outcome rules)
REPEATED_KIND = "check"


def _command(step: ShellStep | RunStep) -> str:
    return step.command if isinstance(step, ShellStep) else step.run.command


def _repeated_runs(
    step: ShellStep | RunStep, index: int, failed_keys: set[str], rerun: frozenset[str]
) -> list[CheckRun]:
    """Evidence from commands no check list knows, as checks by their repetition (run more than once in the
    session: a command that failed once and never ran again was a look around): a failure that states an error
    (its keys are remembered), and a later pass of a key that failed before (an install that passes proves
    nothing; ``deno task ci`` passing after it failed does)."""
    command = _command(step)
    every = repeated_keys(command)
    keys = [k for k in every if k in rerun]
    if isinstance(step, ShellStep) and step.failed:
        sig = signature_of(step.output)
        if not (sig.identifiers or sig.headline):
            return []
        # a line fails in its last command: the ones before it ran to the end (``buf --version && make proto``)
        keys = [k for k in keys if k == every[-1]]
        failed_keys.update(keys)
        verdict, detail = Verdict.FAILED, sig.headline
    elif isinstance(step, RunStep) and step.run.verdict is not Verdict.PASSED:
        return []
    else:
        keys = [k for k in keys if k in failed_keys]
        verdict, detail = Verdict.PASSED, "passed after it failed"
    return [
        CheckRun(f"shell:{index}:{key}", Check(f"repeated:{key}", REPEATED_KIND), command, verdict, "repeated", detail)
        for key in keys
    ]


def _evidence(steps: Sequence[Step]) -> list[Evidence]:
    found: list[Evidence] = []
    answered = False
    final: tuple[int, str] | None = None
    failed_keys: set[str] = set()
    #: whole-check script -> the steps of it that failed (``npm run check`` -> ``vitest``)
    ran_in: dict[str, list[Check]] = {}
    runs = Counter(k for s in steps if isinstance(s, ShellStep | RunStep) for k in repeated_keys(_command(s)))
    rerun = frozenset(k for k, n in runs.items() if n > 1)
    for index, step in enumerate(steps):
        if isinstance(step, ShellStep | RunStep):
            found.extend(_repeated_runs(step, index, failed_keys, rerun))
        if isinstance(step, RunStep):
            run = _failed_as(step)
            found.append(run)
            if run.check != step.run.check:  # the step of the whole check that failed: its pass passes that step
                ran_in.setdefault(step.run.check.family, []).append(run.check)
            if step.run.verdict is Verdict.PASSED:
                found.extend(  # the whole check passing again passed the steps of it that had failed
                    replace(step.run, key=f"{step.run.key}:{c.family}", check=c)
                    for c in ran_in.pop(step.run.check.family, ())
                )
                main = check_key(step.run.check)
                # ``ruff check && mypy`` passing passed both checks, and ``npm test`` echoing ``> vitest run`` vitest
                found.extend(
                    replace(step.run, key=f"{step.run.key}:{key}", check=Check(*key.rsplit(":", 1)))
                    for key in dict.fromkeys((*step.all_families, *step.echoed_families))
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


def _failed_as(step: RunStep) -> CheckRun:
    """A run's evidence: a whole-check script that failed (``npm run check``) failed as the step of it that failed
    (``vitest run``), so a later pass of that step supersedes it (the whole check need not be run again)."""
    if step.run.verdict is not Verdict.FAILED or not is_aggregate(step.run.check.family):
        return step.run
    inner = inner_step(step.run.command, step.output)
    check = check_of_command(inner) if inner else None
    return step.run if check is None else replace(step.run, check=check)


def _gave_up(prompt: PromptStep) -> bool:
    """Whether a prompt gives the work up: a reply to the assistant that says so (a first prompt that says "revert
    X, then fix Y" asks for work)."""
    head = prompt.text.lower()[:120]
    said = [head.find(word) for word in _ABANDON if word in head]
    if not prompt.after_answer or not said:
        return False
    # "revert that. ... run the autocorrect instead": a correction that asks the assistant for other work, not
    # giving up ("forget it, I'll fix it myself" asks nothing of it)
    text = prompt.text.lower()
    asks = (
        m for m in _ASKS_MORE.finditer(text, min(said)) if not _SELF.search(text, max(0, m.start() - 12), m.start())
    )
    return next(asks, None) is None


def _after_giving_up(fix: Lesson, steps: Sequence[Step]) -> bool:
    """Whether a fix was verified after the user's last prompt gave the work up ("leave it, revert the change"):
    what passed then is the undoing, not a fix. (A "revert X, then fix Y" earlier in a session is a task.)"""
    prompts = [s for s in steps if isinstance(s, PromptStep)]
    if not prompts or not _gave_up(prompts[-1]) or prompts[-1].span.end is None or fix.span.end is None:
        return False
    return fix.span.end > prompts[-1].span.end


def _abandoned(steps: Sequence[Step]) -> bool:
    """The session ends interrupted, or its last prompt gives the work up."""
    meaningful = [s for s in steps if not isinstance(s, AnswerStep)]
    if meaningful and isinstance(meaningful[-1], InterruptStep):
        return True
    prompts = [s for s in steps if isinstance(s, PromptStep)]
    return bool(prompts) and _gave_up(prompts[-1])


RESULT_CHARS = 400


#: an answer this short says no result ("You're welcome.", "Done!"): the report is an earlier, longer one
REPORT_MIN_WORDS = 6


def _reporting(answers: Sequence[str]) -> str:
    """The answer that reports the session's result: the last one of some length, else the last."""
    return next((a for a in reversed(answers) if len(a.split()) >= REPORT_MIN_WORDS), answers[-1])


def _last_request(steps: Sequence[Step]) -> int:
    """The index of the session's last prompt that asks for work (a ``remember:`` is no new request), else -1."""
    return max((i for i, s in enumerate(steps) if isinstance(s, PromptStep) and remembered(s.text) is None), default=-1)


def _task_answers(steps: Sequence[Step]) -> list[str]:
    """The answers to the session's task: those before the ``remember:`` prompts it ends on, when the work was done
    and reported before them (what the assistant says to a rule given after the work reports the rule, not the
    work; a rule given in answer to its question is part of the task)."""
    answers = [s.text for s in steps if isinstance(s, AnswerStep)]
    last = _last_request(steps)
    after = next((i for i, s in enumerate(steps) if i > last and isinstance(s, PromptStep)), len(steps))
    before = steps[:after]
    said = [s.text for s in before if isinstance(s, AnswerStep)]
    if not said or not any(isinstance(s, EditStep) for s in before) or said[-1].rstrip().endswith("?"):
        return answers  # no work before the rule, or the assistant asked (the rule answers it)
    return said


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
    after = steps[_last_request(steps) + 1 :]
    return any(isinstance(s, EditStep) for s in after) and any(isinstance(s, AnswerStep) for s in after)


def episode(steps: Sequence[Step], cwd: str | None = None) -> Lesson | None:
    """The session as one past-session lesson, or None (no change made, failed, abandoned)."""
    edits = [s for s in steps if isinstance(s, EditStep)]
    # a prompt that reads as feedback ("the build is broken") is feedback only as a reply to the assistant: as the
    # session's first words it says the task
    tasks = [
        s
        for s in steps
        if isinstance(s, PromptStep)
        and remembered(s.text) is None
        and (not s.after_answer or read_feedback(s.text) is None)
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
    worded = [t.text for t in tasks if not bare_go_on(t.text)]
    first = worded[0] if worded else resumed_task_of(steps) or tasks[0].text
    follow_ups = tuple(" ".join(t.split())[:FOLLOW_UP_CHARS] for t in worded[1:] if rule_in(t) is None)[:MAX_FOLLOW_UPS]
    answers = _task_answers(steps)
    fact = Episode(
        " ".join(first.split())[:TASK_CHARS],
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
    task = session_task(steps)
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
                # the work it was said for (not when the correction is the only words there are: a resumed session)
                said_for = "" if task == " ".join(step.text.split())[: len(task)] else task
                lessons.append(
                    Lesson(RuleName.CORRECTION, step.span, Said(rule.quote, rule.negative, said_after, said_for))
                )
    return lessons


def lessons_of(steps: Sequence[Step], cwd: str | None = None) -> list[Lesson]:
    """Every lesson of a session's steps, in rule order."""
    found = [f for f in failure_fixes(steps, cwd) if not _after_giving_up(f, steps)]
    whole = episode(steps, cwd)
    if whole is not None:
        found.append(whole)
    return found + said(steps, cwd)


def basenames(paths: Sequence[str]) -> list[str]:
    return [basename(p) for p in paths]
