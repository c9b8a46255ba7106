"""The session as an episode: which of its prompts says the task."""

from __future__ import annotations

from ctxbus.memory.model import MemoryItem

from .test_fixes import NPM_TEST_PASSES, VITEST_COMPONENTS_FAIL, component_fix
from .transcript_builder import PYTEST_FAIL, PYTEST_PASS, Transcript, capture, of_rule


def episodes(t: Transcript) -> list[MemoryItem]:
    return of_rule(capture(t), "episode")


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


def test_a_failed_line_failed_in_its_last_command_not_in_every_command_before_it() -> None:
    # ``buf --version && make proto`` failed in make proto; buf --version (never run again) did not fail
    lint = 'proto/r.proto:16:3:Enum zero value name "R_UNKNOWN" should be suffixed with "_UNSPECIFIED". (ENUM_ZERO)\n'
    t = (
        Transcript("s1", cwd="/home/o/svc")
        .prompt("add a status enum to Route in proto/r.proto")
        .edit("/home/o/svc/proto/r.proto", "message Route {", "enum Status { R_UNKNOWN = 0; }\nmessage Route {")
        .bash("make proto", lint + "make: *** [Makefile:6: proto] Error 100", code=2)
        .bash("buf --version && which buf", "1.28.1\n/opt/homebrew/bin/buf\n")
        .bash("buf --version && make proto", "1.47.2\n" + lint + "make: *** [Makefile:6: proto] Error 100", code=2)
        .edit("/home/o/svc/proto/r.proto", "R_UNKNOWN = 0", "R_UNSPECIFIED = 0")
        .bash("make proto", "buf generate\n")
        .say("The enum is in and make proto passes.")
    )
    (episode,) = episodes(t)
    assert "status enum" in episode.title


def test_revert_that_and_do_this_instead_is_a_correction_not_giving_up() -> None:
    t = (
        Transcript("s1")
        .prompt("the lint job is red on main. fix it")
        .edit("/repo/.standard.yml", "", "ignore:\n  - lib/report.rb")
        .say("I added an ignore for report.rb.")
        .prompt("no, revert that. we never add ignores here. run the autocorrect and fix the rest by hand")
        .edit("/repo/.standard.yml", "ignore:\n  - lib/report.rb", "")
        .edit("/repo/lib/report.rb", "ljust(12)", "ljust(width)")
        .bash("pytest -q", PYTEST_PASS)
        .say("Lint and tests pass.")
    )
    assert len(episodes(t)) == 1


def test_forget_it_ill_fix_it_myself_still_gives_the_work_up() -> None:
    from ctxbus.capture.rules import _gave_up
    from ctxbus.capture.steps import PromptStep

    assert _gave_up(PromptStep("forget it, revert that, I'll fix it myself tomorrow", True))
    assert _gave_up(PromptStep("leave it, revert the change", True))
    assert not _gave_up(PromptStep("no, revert that. run the autocorrect and fix the rest by hand", True))


def test_a_session_whose_narrow_test_run_failed_and_whose_test_script_then_ran_that_tool_green_succeeded() -> None:
    """``npx vitest run src/components`` failed; ``npm test`` (its output echoes ``> vitest run``) passed after the
    fix: vitest's last run passed, so the session is no failure."""
    t = component_fix(("npx vitest run src/components", VITEST_COMPONENTS_FAIL), ("npm test", NPM_TEST_PASSES))
    (episode,) = episodes(t)
    assert "ShiftCard" in episode.title and "vitest.config.ts" in episode.content


CHECK_FAILS_IN_TESTS = (
    "\n> shifts@0.3.0 check\n> npm run typecheck && npm test\n\n\n> shifts@0.3.0 typecheck\n> tsc --noEmit\n\n\n"
    "> shifts@0.3.0 test\n> vitest run\n\n ❯ src/lib/settings.test.ts (2 tests | 1 failed) 9ms\n"
    "   × watchSettings > calls back with the merged settings 4ms\n"
    "     → Cannot read properties of undefined (reading 'addListener')\n\n Tests  1 failed | 1 passed (2)\n"
    "npm ERR! code 1\n"
)


def _options_session(passing: tuple[str, str]) -> Transcript:
    return (
        Transcript("s1", cwd="/home/dev/shifts")
        .prompt("add an options page with the settings in storage.sync")
        .edit("/home/dev/shifts/src/lib/settings.ts", "", "export function watchSettings() {}")
        .bash("npm run check", CHECK_FAILS_IN_TESTS, code=1)
        .edit("/home/dev/shifts/test/setup/chrome.ts", "storage: {", "storage: { onChanged: fakeEvent(),")
        .bash(*passing)
        .say("The chrome fake has storage.onChanged now; the tests pass.")
    )


def test_a_whole_check_script_that_failed_in_its_tests_is_superseded_when_those_tests_pass() -> None:
    """``npm run check`` failed in ``vitest run``; after the fix ``npm test`` (``> vitest run``) passed: the tests
    that failed pass, so the session succeeded though the whole check was not run again."""
    (episode,) = episodes(_options_session(("npm test", NPM_TEST_PASSES)))
    assert "options page" in episode.title


def test_a_whole_check_script_that_failed_in_a_step_and_then_passed_whole_succeeded() -> None:
    (episode,) = episodes(_options_session(("npm run check 2>&1 | tail -3", " Tests  2 passed (2)\n")))
    assert "options page" in episode.title


def test_an_episodes_result_is_the_report_of_its_task_not_the_reply_to_a_rule_given_after_it() -> None:
    t = (
        Transcript("s1")
        .prompt("add a mark-as-read toggle to each shelf row, backed by a server fn")
        .edit("src/api/books.rs", "", "pub async fn toggle_read(id: i64) -> Result<bool, ServerFnError>")
        .bash("pytest -q", PYTEST_PASS)
        .say("Done: each row has a mark-as-read toggle calling the new toggle_read server fn; the tests pass.")
        .prompt("remember: run leptosfmt on anything with a view! macro before committing")
        .edit("src/pages/shelf.rs", "view! {<tr>", "view! { <tr>")
        .say("Done: leptosfmt applied to shelf.rs. I'll run it on view! files before calling anything done.")
    )
    (episode,) = episodes(t)
    assert "toggle_read" in episode.content and "leptosfmt applied" not in episode.content


def test_a_rule_given_in_answer_to_the_assistants_question_leaves_the_final_report_the_result() -> None:
    t = (
        Transcript("s1")
        .prompt("make dev services reuse the postgres container between test runs")
        .edit("src/test/resources/application.properties", "", "quarkus.datasource.devservices.reuse=true")
        .say("Docker isn't reachable. Is Docker Desktop installed on this machine, or do you use another runtime?")
        .prompt("remember: this laptop has colima, run `colima start` before tests")
        .bash("pytest -q", PYTEST_PASS)
        .say("With devservices.reuse=true in application.properties the second run reuses the container.")
    )
    (episode,) = episodes(t)
    assert "second run reuses the container" in episode.content
