"""Which step of a wrapper failed: the last check it echoed before its own failure line."""

from __future__ import annotations

import pytest

from ctxbus.capture.inner_step import inner_step

from .transcript_builder import Transcript, capture, of_rule

MAKE_LINT = """mix format --check-formatted
mix credo --strict
Checking 41 source files ...

  Refactoring opportunities
┃
┃ [R] ↘ Cond statements should contain at least two conditions besides `true`, consider using `if` instead.
┃       lib/rota_live/shifts.ex:58:7 #(RotaLive.Shifts.sign_up)

198 mods/funs, found 1 refactoring opportunity.

make: *** [Makefile:9: lint] Error 2
"""
NPM_LINT = """
> web@1.0.0 lint
> eslint src --max-warnings 0

/home/u/web/src/App.tsx
  12:7  error  'unused' is assigned a value but never used  @typescript-eslint/no-unused-vars

✖ 1 problem (1 error, 0 warnings)
"""


@pytest.mark.parametrize(
    ("command", "output", "step"),
    [
        ("make lint", MAKE_LINT, "mix credo --strict"),
        ("npm run lint", NPM_LINT, "eslint src --max-warnings 0"),
        ("deno task check", "Task check deno lint\nerror[no-unused-vars]: `x` is never used\n", "deno lint"),
        ("just test", "cargo test --workspace\ntest result: FAILED. 3 passed; 1 failed\n", "cargo test --workspace"),
    ],
)
def test_the_step_a_wrapper_echoed_before_it_failed(command: str, output: str, step: str) -> None:
    assert inner_step(command, output) == step


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("pytest -q", "FAILED tests/test_a.py::test_x - assert 1 == 2\n1 failed in 0.1s\n"),  # no wrapper
        ("make test", "make: *** [Makefile:3: test] Error 1\n"),  # it echoed nothing
        ("make lint", "make lint\nmake: *** [Makefile:9: lint] Error 2\n"),  # only itself
        ("git commit -m x", "mix credo --strict\n"),  # no check
        ("make lint", "make: *** [lint] Error 2\nmix credo --strict\n"),  # after the wrapper's failure line
    ],
)
def test_no_step_when_nothing_inside_says_more(command: str, output: str) -> None:
    assert inner_step(command, output) is None


def test_a_learning_names_the_step_of_the_wrapper_that_failed() -> None:
    t = (
        Transcript("s1")
        .prompt("make Shifts.sign_up refuse when the shift is full and keep make lint green")
        .bash("make lint", MAKE_LINT, code=2)
        .edit("lib/rota_live/shifts.ex", "cond do\n  taken >= shift.capacity ->", "if taken >= shift.capacity do")
        .bash("make lint", "mix format --check-formatted\nmix credo --strict\nfound no issues.\n")
        .say("make lint is green.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "`make lint` failed in `mix credo --strict` with" in fixes[0].content
