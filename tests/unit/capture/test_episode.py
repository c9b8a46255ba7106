"""The session as an episode: which of its prompts says the task."""

from __future__ import annotations

from datetime import UTC, datetime

from ctxbus.capture.engine import capture_transcript
from ctxbus.capture.items import SessionFacts
from ctxbus.memory.model import MemoryItem

from .transcript_builder import PYTEST_FAIL, PYTEST_PASS, Transcript

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def episodes(t: Transcript) -> list[MemoryItem]:
    items = capture_transcript(t.data(), SessionFacts("acme/web", t.session_id, "Stop", None, NOW))
    return [i for i in items if i.provenance and i.provenance.rule == "episode"]


def test_a_first_prompt_that_reports_a_failure_is_the_task_not_feedback() -> None:
    # "the build is broken" after an answer is feedback on the work; as the first prompt it is the task itself
    t = (
        Transcript("s1")
        .prompt("I added a unit field to Product so the cart can show the price per kg. now the build is broken")
        .bash("pytest -q", PYTEST_FAIL, code=1)
        .edit("shop/product.py", "unit = None", "unit: Unit = Unit.EACH")
        .bash("pytest -q", PYTEST_PASS)
        .say("The product decoder reads the unit now and the tests pass. Shall I show it in the cart too?")
        .prompt("yes please, just the label after the price")
        .edit("shop/cart.py", "price", "price + unit label")
        .say("The cart shows the unit after the price.")
    )
    (episode,) = episodes(t)
    assert "unit field to Product" in episode.title
    assert "label after the price" in episode.content  # the follow-up stays a follow-up


def test_a_reply_that_reports_a_failure_is_still_no_task() -> None:
    t = (
        Transcript("s1")
        .prompt("make the reset links single use")
        .edit("acme/auth/reset.py", "user.set_password(new)", "user.set_password(new)\n    token.mark_used()")
        .say("Done: tokens are marked used.")
        .prompt("the tests are failing now")
        .bash("pytest -q", PYTEST_FAIL, code=1)
        .edit("acme/auth/reset.py", "token.mark_used()", "token.mark_used(commit=True)")
        .bash("pytest -q", PYTEST_PASS)
        .say("Fixed; the tests pass.")
    )
    (episode,) = episodes(t)
    assert "single use" in episode.title and "tests are failing" not in episode.content


PRETTIER_FAILS = (
    "> web@1.0.0 lint\n> prettier --check . && eslint .\n\nChecking formatting...\n[warn] CHANGELOG.md\n"
    "[warn] Code style issues found in 1 file. Run Prettier with --write to fix.\n"
)
ESLINT_FAILS = (
    "> web@1.0.0 lint\n> prettier --check . && eslint .\n\nChecking formatting...\n"
    "All matched files use Prettier code style!\n\n/home/dev/web/src/routes/bookings/[id]/+page.server.ts\n"
    "  2:10  error  'fail' is defined but never used  @typescript-eslint/no-unused-vars\n\n"
    "✖ 1 problem (1 error, 0 warnings)\n"
)
LINT_PASSES = "> web@1.0.0 lint\n> prettier --check . && eslint .\n\nAll matched files use Prettier code style!\n"


def fixes(t: Transcript) -> list[MemoryItem]:
    items = capture_transcript(t.data(), SessionFacts("acme/web", t.session_id, "Stop", None, NOW))
    return [i for i in items if i.provenance and i.provenance.rule == "failure_fix"]


def test_an_error_gone_after_a_command_changed_files_was_fixed_by_that_command_not_the_later_edits() -> None:
    # the formatting error went away when a file was restored from main (no edit); the edits fixed the lint error
    t = (
        Transcript("s1", cwd="/home/dev/web")
        .prompt("the CI lint job fails, fix it")
        .bash("npm run lint", PRETTIER_FAILS, code=1)
        .bash("git checkout main -- .prettierignore && npm run lint", ESLINT_FAILS, code=1)
        .edit("/home/dev/web/src/routes/bookings/[id]/+page.server.ts", "return {", "return fail(400, {")
        .bash("npm run lint", LINT_PASSES)
        .say("Lint passes: the unused import is used now.")
    )
    lint, style = sorted(fixes(t), key=lambda i: "Code style" in i.content)
    assert "no-unused-vars" in lint.title and "+page.server.ts" in lint.content and "Code style" not in lint.content
    assert "Code style issues found" in style.content and "git checkout main -- .prettierignore" in style.content
    assert "+page.server.ts" not in style.content


SQLX_FAILS = (
    "error: `SQLX_OFFLINE=true` but there is no cached data for this query, run `cargo sqlx prepare` to update the "
    "query cache or unset `SQLX_OFFLINE`\n  --> src/repo/accounts.rs:14:5\nmake: *** [Makefile:4: check] Error 101\n"
)
CLIPPY_FAILS = (
    "error: redundant closure\n  --> src/routes/accounts.rs:31:22\n   = help: for further information visit "
    "https://rust-lang.github.io/rust-clippy/master/index.html#redundant_closure\n"
    "make: *** [Makefile:4: check] Error 101\n"
)


def test_an_error_fixed_by_running_a_generator_no_list_knows_names_the_command() -> None:
    t = (
        Transcript("s1", cwd="/home/kai/ledger-api")
        .prompt("add GET /accounts/:id/balance")
        .edit("/home/kai/ledger-api/src/repo/accounts.rs", "", "sqlx::query_as!(Balance, ...)")
        .bash("make check", SQLX_FAILS, code=2)
        .bash("cargo sqlx prepare -- --all-targets", "query data written to .sqlx in the current directory")
        .bash("git status --short .sqlx", "?? .sqlx/query-1f2e.json")
        .bash("make check", CLIPPY_FAILS, code=2)
        .edit("/home/kai/ledger-api/src/routes/a.rs", ".map_err(|e| AppError::from(e))", ".map_err(AppError::from)")
        .bash("make check", "Finished `dev` profile\ntest result: ok. 12 passed; 0 failed")
        .say("Balance endpoint added; make check passes.")
    )
    by_error = {("no cached data" in i.content): i for i in fixes(t)}
    assert set(by_error) == {True, False}
    assert "cargo sqlx prepare" in by_error[True].content and "map_err" not in by_error[True].content
    assert "redundant" in by_error[False].content


def test_an_error_that_went_away_with_nothing_done_for_it_is_no_lesson() -> None:
    t = (
        Transcript("s1", cwd="/home/dev/web")
        .prompt("the CI lint job fails, fix it")
        .bash("npm run lint", PRETTIER_FAILS, code=1)
        .bash("npm run lint", ESLINT_FAILS, code=1)
        .edit("/home/dev/web/src/routes/bookings/[id]/+page.server.ts", "return {", "return fail(400, {")
        .bash("npm run lint", LINT_PASSES)
        .say("Lint passes.")
    )
    (lint,) = fixes(t)
    assert "no-unused-vars" in lint.title and "Code style" not in lint.content
