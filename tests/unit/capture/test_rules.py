"""The capture rules on transcripts in Claude Code's shapes: what becomes a lesson and what never does."""

from __future__ import annotations

import pytest

from ctxbus.capture.engine import capture_transcript
from ctxbus.capture.items import SessionFacts
from ctxbus.capture.signature import signature_of
from ctxbus.memory.model import MemoryItem, MemoryKind, Outcome

from .transcript_builder import NOW, PYTEST_FAIL, PYTEST_PASS, Transcript, capture, of_rule


def rules(items: list[MemoryItem]) -> list[str]:
    return [i.provenance.rule for i in items if i.provenance]


def fail_fix_pass(session: str = "s1", hits: int = 1) -> Transcript:
    t = Transcript(session).prompt("users can reuse an old password reset link. fix it")
    for _ in range(hits):
        t.bash("pytest tests/auth -q", PYTEST_FAIL, code=1)
    t.edit("acme/auth/reset.py", "user.set_password(new)", "user.set_password(new)\n    token.mark_used()")
    t.bash("pytest tests/auth -q", PYTEST_PASS)
    return t.say("Reset tokens are now single use; the auth tests pass.")


def test_a_failure_its_fix_and_the_pass_are_one_learning() -> None:
    items = capture(fail_fix_pass())
    fixes = [i for i in items if i.provenance and i.provenance.rule == "failure_fix"]
    assert len(fixes) == 1
    fix = fixes[0]
    assert fix.kind is MemoryKind.LEARNING and fix.outcome is Outcome.SUCCESSFUL and fix.source == "captured"
    assert "test_link_is_single_use" in fix.content and "reset.py" in fix.content
    assert "token.mark_used()" in fix.content  # the gist of the changed lines
    assert "`pytest tests/auth -q` passed" in fix.content  # the verifying command
    assert [f.path for f in fix.files] == ["acme/auth/reset.py"]
    assert fix.provenance is not None and fix.provenance.transcript_start is not None
    assert fix.provenance.transcript_end is not None and fix.provenance.transcript_end > fix.provenance.transcript_start
    assert fix.confidence < 0.5  # captured conviction starts below an import's


def test_the_same_error_hit_five_times_is_one_learning() -> None:
    items = capture(fail_fix_pass(hits=5))
    fixes = [i for i in items if i.provenance and i.provenance.rule == "failure_fix"]
    assert len(fixes) == 1 and "hit 5 times" in fixes[0].content


def test_the_same_fix_in_another_session_has_the_same_id() -> None:
    first = [i for i in capture(fail_fix_pass("s1")) if i.provenance and i.provenance.rule == "failure_fix"]
    again = [i for i in capture(fail_fix_pass("s2")) if i.provenance and i.provenance.rule == "failure_fix"]
    assert first[0].id == again[0].id


def test_a_failure_never_fixed_or_passing_without_edits_is_no_learning() -> None:
    given_up = (
        Transcript()
        .prompt("fix the reset test")
        .bash("pytest tests/auth -q", PYTEST_FAIL, code=1)
        .edit("acme/auth/reset.py", "a", "b")
        .bash("pytest tests/auth -q", PYTEST_FAIL, code=1)
        .say("I wasn't able to fix it.")
    )
    assert capture(given_up) == []
    flaky = Transcript().prompt("run the tests").bash("pytest -q", PYTEST_FAIL, code=1).bash("pytest -q", PYTEST_PASS)
    assert capture(flaky.say("They pass on a second run.")) == []


def test_the_session_is_an_episode_with_its_task_files_and_verification() -> None:
    (episode,) = [i for i in capture(fail_fix_pass()) if i.kind is MemoryKind.ATTEMPT]
    assert episode.outcome is Outcome.SUCCESSFUL and episode.session_id == "s1"
    assert "reset link" in episode.content and "acme/auth/reset.py" in episode.content
    assert "pytest tests/auth -q" in episode.content


def test_nothing_from_small_talk_exploration_or_aborted_sessions() -> None:
    chat = Transcript().prompt("morning! how was your weekend?").say("Good morning! Ready when you are.")
    explore = (
        Transcript()
        .prompt("where are order totals computed?")
        .read("orders/totals.py")
        .bash("grep -rn total orders/", "orders/totals.py:3: def total(")
        .say("In orders/totals.py, total().")
    )
    aborted = (
        Transcript()
        .prompt("rewrite the CLI with clap 4")
        .edit("src/main.rs", "a", "b")
        .interrupt()
        .prompt("never mind, let's stop here")
    )
    assert capture(chat) == [] and capture(explore) == [] and capture(aborted) == []


def test_a_correction_after_an_assistant_turn_quotes_the_user() -> None:
    t = (
        Transcript()
        .prompt("add lodash to the web package")
        .bash("npm install lodash", "added 1 package")
        .say("Installed lodash with npm.")
        .prompt("no, we use pnpm here, not npm. Always use pnpm in this repo.")
    )
    items = capture(t)
    (rule,) = [i for i in items if i.provenance and i.provenance.rule == "correction"]
    assert rule.kind is MemoryKind.PRINCIPLE and "pnpm" in rule.content and rule.content.startswith("The user said")


def test_a_correction_names_the_task_it_was_said_in() -> None:
    """A rule is given for a kind of work: the item says which (a later prompt about similar work finds it)."""
    t = (
        Transcript()
        .prompt("add a reference column to bookings with a migration")
        .edit("Sources/App/configure.swift", "app.migrations.add(CreateBooking())", "app.autoMigrate()")
        .say("Added the migration and auto-migrate on boot.")
        .prompt("no, never call autoMigrate in configure.swift; prod migrates in the deploy job")
    )
    (rule,) = [i for i in capture(t) if i.provenance and i.provenance.rule == "correction"]
    assert rule.content.startswith('The user said: "no, never call autoMigrate')
    assert rule.content.endswith("(While: add a reference column to bookings with a migration)")
    assert rule.title.startswith("no, never call autoMigrate")  # the title stays the user's words


def test_a_correction_in_a_resumed_session_does_not_repeat_itself_as_its_task() -> None:
    t = Transcript().say("Pushed to main.").prompt("Never push straight to main, open a PR.")
    (rule,) = [i for i in capture(t) if i.provenance and i.provenance.rule == "correction"]
    assert "While:" not in rule.content


def test_a_remembered_text_is_stored_as_said_without_its_task() -> None:
    t = Transcript().prompt("wire the mailer").say("Done.").prompt("remember: staging mail goes to mailpit on :8025")
    (item,) = [i for i in capture(t) if i.provenance and i.provenance.rule == "remember"]
    assert item.content == "staging mail goes to mailpit on :8025"


def test_a_never_rule_is_a_warning_and_descriptions_are_not_rules() -> None:
    t = Transcript().prompt("deploy it").say("Pushed to main.").prompt("Never push straight to main, open a PR.")
    (warning,) = [i for i in capture(t) if i.provenance and i.provenance.rule == "correction"]
    assert warning.kind is MemoryKind.WARNING and warning.mitigation
    story = Transcript().prompt("cookies").say("Set Secure.").prompt("that broke login, the cookie never gets set")
    assert [i for i in capture(story) if i.provenance and i.provenance.rule == "correction"] == []


def test_one_off_redirections_and_first_prompts_are_not_rules() -> None:
    one_off = Transcript().prompt("edit the config").say("Edited settings.py.").prompt("no, the other file")
    first = Transcript().prompt("always use tabs. add a helper").say("ok")  # no assistant turn before it
    assert rules(capture(one_off)) == [] and rules(capture(first)) == []


def test_remember_prompts_are_principles_at_once() -> None:
    t = Transcript().prompt("Remember: the MSRV is 1.74; never use let-else chains")
    (item,) = capture(t)
    assert item.kind is MemoryKind.PRINCIPLE and item.content == "the MSRV is 1.74; never use let-else chains"
    assert item.provenance is not None and item.provenance.rule == "remember"


def test_edits_to_env_files_are_never_quoted() -> None:
    t = (
        Transcript()
        .prompt("the db test fails")
        .bash("pytest -q", PYTEST_FAIL, code=1)
        .edit(".env", "DB_PASSWORD=old", "DB_PASSWORD=hunter2-s3cret")
        .bash("pytest -q", PYTEST_PASS)
        .say("fixed")
    )
    assert all("hunter2" not in i.content for i in capture(t))


def test_redaction_is_applied_to_every_text_it_stores() -> None:
    t = Transcript().prompt("remember: the token is abc-SECRET-123").say("ok")
    items = capture_transcript(
        t.data(), SessionFacts("p", "s", "Stop", None, NOW), redact=lambda s: s.replace("abc-SECRET-123", "[x]")
    )
    assert items and all("SECRET" not in i.content and "SECRET" not in i.title for i in items)


BAZEL_FAIL = """INFO: Analyzed target //server:handler_test (0 packages loaded, 0 targets configured).
FAIL: //server:handler_test (see /home/dev/.cache/bazel/testlogs/server/handler_test/test.log)
server/handler_test.cc:41: Failure
Expected equality of these values: status.code() Which is: 404
INFO: Build completed, 1 test FAILED, 2 total actions
"""
BAZEL_PASS = "INFO: Build completed successfully, 3 total actions\n//server:handler_test PASSED in 0.4s\n"


def test_a_command_no_list_knows_is_a_check_by_its_repetition() -> None:
    t = (
        Transcript("s1")
        .prompt("the handler answers 404 for an empty body, it should be 400")
        .bash("bazel test //server:handler_test", BAZEL_FAIL, code=3)
        .edit("server/handler.cc", "return NotFound();", 'return BadRequest("empty body");')
        .bash("bazel test //server:handler_test --test_output=errors", BAZEL_PASS)
        .say("Empty bodies now get 400.")
    )
    items = capture(t)
    fixes = [i for i in items if i.provenance and i.provenance.rule == "failure_fix"]
    assert len(fixes) == 1
    assert "handler.cc" in fixes[0].content and "handler_test.cc:41: Failure" in fixes[0].content
    assert "bazel test //server:handler_test" in fixes[0].content


def test_looking_commands_and_failures_that_say_nothing_are_no_checks() -> None:
    looked = (
        Transcript("s1")
        .prompt("where is the handler config?")
        .bash("cat config/handler.yaml", "cat: config/handler.yaml: No such file or directory", code=1)
        .write("config/handler.yaml", "timeout: 5\n")
        .bash("cat config/handler.yaml", "timeout: 5")
    )
    silent = (
        Transcript("s2")
        .prompt("run the smoke script")
        .bash("./scripts/smoke.sh", "", code=1)
        .edit("scripts/smoke.sh", "set -e", "set -eu")
        .bash("./scripts/smoke.sh", "")
    )
    assert "failure_fix" not in rules(capture(looked)) + rules(capture(silent))


def test_a_build_piped_into_a_filter_fails_by_its_error_lines_not_the_filters_exit_code() -> None:
    red = "src/Api/Vehicle.cs(9,19): error CS8618: Non-nullable property 'Vin' must contain a non-null value.\n"
    green = "    0 Warning(s)\n    0 Error(s)\nTime Elapsed 00:00:11.37\n"
    t = (
        Transcript("s1")
        .prompt("nullable warnings are errors now, get the build green")
        .bash("dotnet build Fleet.sln 2>&1 | grep -E 'error|Warn|Elapsed'", red)  # grep found lines: exit 0
        .edit("src/Api/Vehicle.cs", "public string Vin { get; set; }", "public required string Vin { get; set; }")
        .bash("dotnet build Fleet.sln 2>&1 | grep -E 'error|Warn|Elapsed'", green)
        .say("The build is green.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "CS8618" in fixes[0].title and "Vehicle.cs" in fixes[0].title


def test_a_repeated_command_is_verified_by_a_later_line_that_also_runs_it() -> None:
    red = 'Bundling asset Stack/Fn/Code/Stage...\n✘ [ERROR] Could not resolve "@aws-sdk/client-sesv2"\n'
    t = (
        Transcript("s1")
        .prompt("add the digest lambda")
        .bash("npx cdk synth Stack-dev -q 2>&1 | tail -14", red, code=1)
        .edit("package.json", '"deps": {', '"deps": {\n    "@aws-sdk/client-sesv2": "3.658.1",')
        .bash("npm install 2>&1 | tail -1 && npx cdk synth Stack-dev -q", "added 4 packages\nBundling asset ...")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and 'Could not resolve "@aws-sdk/client-sesv2"' in fixes[0].content


def test_an_episodes_task_is_the_first_prompt_that_says_one_not_a_bare_go_on() -> None:
    t = (
        Transcript("s1")
        .prompt("continue")
        .say("Where were we?")
        .prompt("extract the slot list of the booking page into a slot-picker component")
        .edit("app/View/Components/SlotPicker.php", "", "class SlotPicker {}")
        .bash("pytest -q", PYTEST_PASS)
        .say("Extracted.")
    )
    episodes = of_rule(capture(t), "episode")
    assert len(episodes) == 1 and "slot-picker component" in episodes[0].title


MVN_TOO_OLD = (
    "[ERROR] Rule 0: org.apache.maven.enforcer.rules.version.RequireMavenVersion failed with message:\n"
    "[ERROR] Detected Maven Version: 3.6.3 is not in the allowed range [3.9.6,).\nBUILD FAILURE\n"
)
MVN_OK = "[INFO] Tests run: 9, Failures: 0, Errors: 0, Skipped: 0\n[INFO] BUILD SUCCESS\n"


def test_a_failure_passed_by_running_another_program_is_no_fix_of_the_edits_meanwhile() -> None:
    t = (
        Transcript("s1")
        .prompt("the invoice endpoint accepts a blank customer id, make it a 400")
        .bash("mvn -q test -Dtest=InvoiceControllerTest", MVN_TOO_OLD, code=1)
        .edit("src/main/java/acme/InvoiceController.java", "create(@RequestBody", "create(@Valid @RequestBody")
        .bash("./mvnw test -Dtest=InvoiceControllerTest", MVN_OK)
        .say("Validation is on; the tests pass with the wrapper (the system Maven is too old for the enforcer).")
    )
    items = capture(t)
    assert "failure_fix" not in rules(items) and "episode" in rules(items)
    episode = next(i for i in items if i.provenance and i.provenance.rule == "episode")
    assert "Validation is on" in episode.content


def test_an_episodes_result_is_the_answer_that_reports_it_not_a_closing_pleasantry() -> None:
    t = fail_fix_pass().prompt("thanks!").say("You're welcome.")
    episode = next(i for i in capture(t) if i.provenance and i.provenance.rule == "episode")
    assert "single use" in episode.content and "welcome" not in episode.content


SCALAFMT_RED = "[warn] build.sbt:1: formatting issues\n[error] (api / Test / scalafmtCheck) 2 files must be formatted\n"


def test_a_failure_fixed_by_running_a_formatter_is_one_learning_that_names_the_command() -> None:
    t = (
        Transcript("s1")
        .prompt("CI's format check fails on the api tests")
        .bash("sbt api/Test/scalafmtCheck", SCALAFMT_RED, code=1)
        .bash("sbt api/Test/scalafmt", "[info] Reformatted 2 Scala sources")
        .bash("sbt api/Test/scalafmtCheck", "[success] Total time: 3 s")
        .say("Formatted; the check passes.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1
    assert "by running `sbt api/Test/scalafmt`" in fixes[0].title and fixes[0].files == ()
    assert "Verified: `sbt api/Test/scalafmtCheck` passed." in fixes[0].content


def test_the_same_tool_run_wider_verifies_what_it_failed_narrower() -> None:
    red = "[error] ==> X rates.RatesSpec.zone surcharge  0.004s munit.ComparisonFailException: 12 != 14\n"
    t = (
        Transcript("s1")
        .prompt("the zone surcharge is off by two")
        .bash('sbt "testOnly rates.RatesSpec"', red, code=1)
        .edit("src/main/scala/rates/Surcharge.scala", "base + 12", "base + 14")
        .bash("sbt test", "[info] Passed: Total 41, Failed 0, Errors 0, Passed 41")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "Surcharge.scala" in fixes[0].title


FLUTTER_RED = """00:21 +61 -1: test/services/reminder_service_test.dart: schedules one notification per habit [E]
  LateInitializationError: Field '_channel@41394172' has not been initialized.
  #1      ReminderService.scheduleDaily (package:tidyhabit/services/reminder_service.dart:33:24)
00:24 +72 -1: Some tests failed.
"""


def test_a_test_run_piped_into_a_filter_fails_by_what_its_output_says() -> None:
    t = (
        Transcript("s1")
        .prompt("the reminder test is red, fix it")
        .bash("flutter test 2>&1 | grep -E 'passed|failed|Error' | head -20", FLUTTER_RED)  # grep: exit 0
        .edit(
            "lib/services/reminder_service.dart", "late final Channel _channel;", "static const _channel = Channel();"
        )
        .bash("flutter test 2>&1 | tail -3", "00:24 +73: All tests passed!\n")
        .say("Fixed.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "LateInitializationError" in fixes[0].content


SBT_RED = """parcel.core.ZoneRepoSuite:
==> X parcel.core.ZoneRepoSuite.beforeAll 0.6s org.flywaydb.core.api.exception.FlywayValidateException: failed
Migration checksum mismatch for migration version 7
[error] Failed: Total 3, Failed 1, Errors 0, Passed 2
[error] (core / Test / test) sbt.TestsFailedException: Tests failed
"""
SBT_GREEN = "[info] Passed: Total 4, Failed 0, Errors 0, Passed 4\n[success] Total time: 19 s\n"


def test_a_command_no_list_knows_piped_into_a_filter_fails_by_what_its_output_says() -> None:
    t = (
        Transcript("s1")
        .prompt("tests fail with some flyway error since yesterday")
        .bash("sbt core/test 2>&1 | tail -40", SBT_RED)
        .write("modules/core/src/main/resources/db/migration/V8__precision.sql", "ALTER TABLE rates ...;")
        .bash("sbt core/test 2>&1 | tail -12", SBT_GREEN)
        .say("Green again.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "FlywayValidateException" in fixes[0].content


def test_filtered_output_that_reports_no_failure_is_no_failure() -> None:
    quiet = "[info] Passed: Total 5, Failed 0, Errors 0, Passed 5\nok: [instance] failed=0 changed=0\n0 errors\n"
    t = (
        Transcript("s1")
        .prompt("run the suite")
        .bash("sbt test 2>&1 | tail -5", quiet)
        .edit("build.sbt", 'scalaVersion := "3.5.1"', 'scalaVersion := "3.5.2"')
        .bash("sbt test 2>&1 | tail -5", quiet)
    )
    assert "failure_fix" not in rules(capture(t))


def test_a_pass_of_another_check_with_no_change_since_the_failure_does_not_close_it() -> None:
    red = "==> Linting charts/ingest-api\n[ERROR] templates/hpa.yaml: unable to parse YAML: did not find expected key\n"
    t = (
        Transcript("s1")
        .prompt("add an HPA to the chart")
        .bash("helm lint charts/ingest-api", red, code=1)
        .bash("helm template ingest-api charts/ingest-api -s templates/hpa.yaml --debug", "kind: HPA\n")
        .edit("charts/ingest-api/templates/_helpers.tpl", '{{- define "labels" -}}\n\n', '{{- define "labels" -}}\n')
        .bash("helm lint charts/ingest-api", "1 chart(s) linted, 0 chart(s) failed\n")
        .say("The chart lints.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "did not find expected key" in fixes[0].content
    assert "_helpers.tpl" in fixes[0].content


TSC_TWO_FILES = """src/bookings/bookings.controller.ts(31,4): error TS2304: Cannot find name 'Patch'.
src/bookings/bookings.service.ts(11,37): error TS2322: Type 'null' is not assignable to type 'Date | undefined'.

Found 2 errors in 2 files.
"""


def test_errors_in_two_files_each_fixed_in_its_own_file_are_two_learnings() -> None:
    t = (
        Transcript("s1")
        .prompt("add PATCH /bookings/:id/cancel")
        .bash("npx tsc --noEmit", TSC_TWO_FILES, code=2)
        .edit(
            "src/bookings/bookings.controller.ts",
            "import { Get } from '@nestjs/common';",
            "import { Get, Patch } from '@nestjs/common';",
        )
        .edit("src/bookings/bookings.service.ts", "where: { cancelledAt: null }", "where: { cancelledAt: IsNull() }")
        .bash("npx tsc --noEmit", "")
        .say("Compiles.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    by_code = {f.title.split()[2]: f for f in fixes}
    assert sorted(by_code) == ["TS2304", "TS2322"]
    assert "bookings.controller.ts" in by_code["TS2304"].title and "Patch" in by_code["TS2304"].content
    assert "bookings.service.ts" in by_code["TS2322"].title and "IsNull()" in by_code["TS2322"].content
    assert "IsNull()" not in by_code["TS2304"].content


def test_a_whole_check_script_failing_on_errors_in_two_files_is_two_learnings() -> None:
    # ``make check`` (fmt, lint, tsc, tests) is a test run by its name, but here it failed on two type errors in
    # two files, each fixed in its own: as a type checker's failure, two things learned (heldout4's ``deno task ci``)
    t = (
        Transcript("s1")
        .prompt("`make check` fails at the type check since I merged the --input flag. fix please")
        .bash("make check", TSC_TWO_FILES, code=1)
        .edit(
            "src/bookings/bookings.controller.ts",
            "import { Get } from '@nestjs/common';",
            "import { Get, Patch } from '@nestjs/common';",
        )
        .edit("src/bookings/bookings.service.ts", "where: { cancelledAt: null }", "where: { cancelledAt: IsNull() }")
        .bash("make check", "npx prettier --check . && npx eslint . && npx tsc --noEmit && npx jest\nok\n")
        .say("make check passes.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert sorted(f.title.split()[2] for f in fixes) == ["TS2304", "TS2322"]


def test_a_failure_run_again_by_the_whole_check_script_is_fixed_and_the_session_an_episode() -> None:
    # ``make test`` failed; after the fix ``make check`` (which runs the tests) passed: the session succeeded, so it
    # is an episode as well as a fix (heldout12's ``deno task test``, then ``deno task check``)
    t = (
        Transcript("s1")
        .prompt("send the organiser an email on each new RSVP")
        .edit("lib/notify.ts", "", "export async function notifyRsvp() {}\n")
        .bash("make test", 'error: Uncaught (in promise) NotCapable: Requires env access to "RESEND_API_KEY"\n', code=1)
        .edit("lib/notify.ts", "export async function notifyRsvp() {}", "export async function notifyRsvp(cfg) {}")
        .bash("make check", "deno fmt --check && deno task test\nok | 5 passed | 0 failed (40ms)\n")
        .say("Organisers now get an email on each RSVP; make check passes (fmt, lint, check and 5 tests).")
    )
    items = capture(t)
    assert len(of_rule(items, "failure_fix")) == 1
    assert len(of_rule(items, "episode")) == 1


def test_a_fix_that_replaces_a_line_shows_what_it_replaced() -> None:
    red = "stdin - HorizontalPodAutoscaler x failed validation: could not find schema for HorizontalPodAutoscaler\n"
    t = (
        Transcript("s1")
        .prompt("validate the chart with kubeconform")
        .bash("helm template x charts/x | kubeconform -strict -kubernetes-version 1.29.0 -summary", red, code=1)
        .edit(
            "charts/x/templates/hpa.yaml",
            "apiVersion: autoscaling/v2beta2\nkind: HPA",
            "apiVersion: autoscaling/v2\nkind: HPA",
        )
        .bash("helm template x charts/x | kubeconform -strict -kubernetes-version 1.29.0 -summary", "Valid: 7\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "autoscaling/v2beta2" in fixes[0].content and "autoscaling/v2" in fixes[0].content


def test_a_fixs_text_holds_the_error_message_not_only_the_test_section_banner() -> None:
    task = "<Task pending name='Task-7' coro=<_wrap_asyncgen_fixture.<locals>.setup() running at plugin.py:280>>"
    red = f"""==================================== ERRORS ====================================
______________ ERROR at setup of test_get_shipment_returns_events ______________
tests/conftest.py:38: in db_session
    async with engine.begin() as conn:
.venv/lib/python3.12/site-packages/sqlalchemy/ext/asyncio/engine.py:1063: in begin
    async with self._trans_ctx():
E   RuntimeError: Task {task} got Future <Future pending cb=[_on_waiter_completed()]> attached to a different loop
=========================== short test summary info ============================
ERROR tests/api/test_shipments.py::test_get_shipment_returns_events - RuntimeError: Task <Task pending ...
3 passed, 1 error in 2.41s
"""
    t = (
        Transcript("s1")
        .prompt("the api tests fail after the pytest-asyncio bump")
        .bash("pytest tests/api -q 2>&1 | tail -25", red)
        .edit(
            "pyproject.toml",
            'asyncio_mode = "auto"',
            'asyncio_mode = "auto"\nasyncio_default_fixture_loop_scope = "session"',
        )
        .bash("pytest tests/api -q 2>&1 | tail -3", "4 passed in 0.40s\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "attached to a different loop" in fixes[0].content


def test_the_same_error_in_two_files_is_one_learning() -> None:
    red = (
        "internal/http/handler.go:57:9: Error return value of `w.Write` is not checked (errcheck)\n"
        "internal/http/health.go:19:20: Error return value of `Encode` is not checked (errcheck)\n"
    )
    t = (
        Transcript("s1")
        .prompt("golangci-lint fails on main")
        .bash("golangci-lint run ./...", red, code=1)
        .edit("internal/http/handler.go", "w.Write(body)", "if _, err := w.Write(body); err != nil {")
        .edit("internal/http/health.go", "enc.Encode(s)", "if err := enc.Encode(s); err != nil {")
        .bash("golangci-lint run ./...", "0 issues.\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "handler.go" in fixes[0].content and "health.go" in fixes[0].content


def test_a_resumed_sessions_episode_takes_its_task_from_the_compaction_summary_not_continue() -> None:
    t = (
        Transcript("s1")
        .summary_line("tomlq: array indexing in queries")
        .compact_summary("Summary:\n1. Primary Request and Intent: support array indices in queries (servers[0].host).")
        .prompt("continue")
        .edit(
            "src/Tomlq/Eval.hs", "step (Key k) v = lookup k v", "step (Key k) v = lookup k v\nstep (Index i) v = at i v"
        )
        .bash("pytest -q", PYTEST_PASS)
        .say("Array indices work; the eval tests pass.")
    )
    episodes = of_rule(capture(t), "episode")
    assert len(episodes) == 1 and "array indices in queries" in episodes[0].title
    titled = Transcript("s2").summary_line("tomlq: array indexing in queries").prompt("continue")
    titled.edit("src/Tomlq/Eval.hs", "a", "b").bash("pytest -q", PYTEST_PASS).say("Done.")
    assert "array indexing in queries" in of_rule(capture(titled), "episode")[0].title


def test_a_reply_with_no_word_is_no_task_of_a_resumed_session() -> None:
    # "carry on" after the compaction, then only a thumbs-up at the end: the task is the summary's request
    t = (
        Transcript("s1")
        .summary_line("Route detail: embed the assigned driver")
        .compact_summary("Summary:\n1. Primary Request and Intent: embed the assigned driver in GET /routes/:id.")
        .prompt("carry on")
        .edit("internal/repo/routes.go", "Query().Where(route.ID(id))", "Query().Where(route.ID(id)).WithDriver()")
        .bash("go test ./...", "ok  \tacme/internal/repo\t0.02s\n")
        .say("The route detail embeds its driver now; go test passes.")
        .prompt("\U0001f44d")
    )
    episodes = of_rule(capture(t), "episode")
    assert len(episodes) == 1 and "embed the assigned driver in GET /routes/:id" in episodes[0].title


def test_a_formatter_and_its_check_in_one_command_fix_and_verify() -> None:
    red = (
        "[warn] /home/ivo/parcel/api/src/test/scala/parcel/api/RateRoutesSuite.scala isn't formatted properly!\n"
        "[error] (api / Test / scalafmtCheck) 1 files must be formatted\n"
    )
    t = (
        Transcript("s1")
        .prompt("add the zone route and its suite")
        .bash("sbt 'api/testOnly parcel.api.RateRoutesSuite' scalafmtCheckAll", red, code=1)
        .bash("sbt api/Test/scalafmt scalafmtCheckAll", "[success] Total time: 9 s\n")
        .say("Formatted; the check passes.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "scalafmtCheck" in fixes[0].content and "sbt api/Test/scalafmt" in fixes[0].content
    assert "RateRoutesSuite.scala" in fixes[0].title


def test_findings_that_only_point_at_a_file_are_no_error_of_their_own() -> None:
    red = (
        "WARNING  Listing 2 violation(s) that are fatal\n"
        "fqcn[action-core]: Use FQCN for builtin module actions (get_url).\n"
        "roles/ne/tasks/main.yml:8 Use `ansible.builtin.get_url` or `ansible.legacy.get_url` instead.\n\n"
        "yaml[truthy]: Truthy value should be one of [false, true]\n"
        "roles/ne/handlers/main.yml:5\n\n"
        "Failed: 2 failure(s), 0 warning(s) on 9 files.\n"
    )
    t = (
        Transcript("s1")
        .prompt("the role fails ansible-lint")
        .bash("ansible-lint roles/ne", red, code=2)
        .edit("roles/ne/tasks/main.yml", "  get_url:", "  ansible.builtin.get_url:")
        .edit("roles/ne/handlers/main.yml", "daemon_reload: yes", "daemon_reload: true")
        .bash("ansible-lint roles/ne", "Passed: 0 failure(s), 0 warning(s) on 9 files.\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "fqcn[action-core]" in fixes[0].content


def test_a_count_of_nothing_states_no_error() -> None:
    out = "instance : ok=9 changed=6 unreachable=0 failed=0 skipped=0\nCRITICAL Idempotence test failed because of:\n"
    assert signature_of(out).headline.startswith("CRITICAL Idempotence test failed")


def test_a_command_no_list_knows_is_verified_by_a_later_line_that_runs_a_known_check_too() -> None:
    red = "\n  FAIL ......... 144 files, 1 style issue\n  ⨯ app/View/Components/SlotPicker.php   no_unused_imports\n"
    t = (
        Transcript("s1")
        .prompt("extract the slot picker component")
        .bash("./vendor/bin/pint --test", red, code=1)
        .edit("app/View/Components/SlotPicker.php", "use Illuminate\\Support\\Str;\nuse X;", "use X;")
        .bash(
            "./vendor/bin/pint --test && ./vendor/bin/pest --parallel", "  PASS  ... 144 files\n\n  Tests:  52 passed"
        )
        .say("Done.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "no_unused_imports" in fixes[0].title and "SlotPicker.php" in fixes[0].title


def test_findings_that_name_no_rule_in_two_files_are_one_learning() -> None:
    red = "src/Tomlq/Render.hs:33:17-42: Warning: Use concatMap\nsrc/Tomlq/Eval.hs:58:1-38: Warning: Eta reduce\n"
    t = (
        Transcript("s1")
        .prompt("make hlint happy")
        .bash("hlint src", red, code=1)
        .edit("src/Tomlq/Render.hs", "concat (map f xs)", "concatMap f xs")
        .edit("src/Tomlq/Eval.hs", "step x = go x", "step = go")
        .bash("hlint src", "No hints\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and "Render.hs" in fixes[0].content and "Eval.hs" in fixes[0].content


REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to "
    "proceed."
)


def test_a_command_the_user_rejected_is_no_failure() -> None:
    t = (
        Transcript("s1")
        .prompt("deploy the contracts to the testnet")
        .bash("forge script script/Deploy.s.sol --broadcast", REJECTED, code=1)
        .prompt("no, dry run only. always simulate first")
        .edit("script/Deploy.s.sol", "uint256 fee = 5;", "uint256 fee = 50;")
        .bash("forge script script/Deploy.s.sol", "Script ran successfully.\n")
        .say("Simulated.")
    )
    assert "failure_fix" not in rules(capture(t))


def test_a_command_no_list_knows_that_failed_and_then_passed_makes_the_session_successful() -> None:
    red = "Check file:///home/rui/csvkit/cli.ts\nerror: TS2345 [ERROR]: Argument of type 'string | undefined'\n"
    t = (
        Transcript("s1")
        .prompt("`deno task ci` fails at the type check since I merged the --input flag. fix please")
        .bash("deno task ci", red, code=1)
        .edit("cli.ts", "const input = args.input;", "const input = args.input ?? usage();")
        .bash("deno task ci", "ok | 9 passed | 0 failed (120ms)\n")
        .prompt("remember: the release job runs deno publish --dry-run first")
    )
    episodes = of_rule(capture(t), "episode")
    assert len(episodes) == 1 and "deno task ci" in episodes[0].title


def test_a_command_that_failed_once_and_never_ran_again_does_not_fail_the_session() -> None:
    t = (
        Transcript("s1")
        .prompt("add the zone route")
        .bash("sbt 'core/Test/runMain parcel.core.Debug'", "[error] java.lang.RuntimeException: No main class", code=1)
        .edit("RateRoutes.scala", "routes = a", "routes = a <+> zone")
        .bash("pytest -q", PYTEST_PASS)
        .say("The zone route is in and the tests pass.")
    )
    assert len(of_rule(capture(t), "episode")) == 1


def test_a_pass_by_a_line_whose_later_segment_reruns_the_failed_check_is_a_fix() -> None:
    red = "* checking Rd \\usage sections ... WARNING\nUndocumented arguments in documentation object 'svy_mean'\n"
    red += "Status: 1 WARNING\nError: R CMD check found WARNINGs\nmake: *** [check] Error 1\n"
    t = (
        Transcript("s1")
        .prompt("make check must be clean before we tag")
        .bash("make check", red, code=2)
        .edit("R/mean.R", "#' @param x values", "#' @param x values\n#' @param na.rm drop missing values")
        .bash("Rscript -e 'devtools::document()' && make check", "Status: OK\n")
    )
    assert len(of_rule(capture(t), "failure_fix")) == 1


def test_a_located_line_that_says_passed_is_no_error() -> None:
    out = (
        "test/test_calib/test_main.c:14: test_dry_reading_maps_to_zero [PASSED]\n"
        "test/test_calib/test_main.c:20: test_wet_reading_maps_to_100: Expected 100 Was 99 [FAILED]\n"
    )
    sig = signature_of(out)
    assert "PASSED" not in sig.identifiers and "Expected 100 Was 99" in sig.headline


def test_errors_located_by_the_frame_after_them_split_by_file() -> None:
    red = (
        "Check file:///home/rui/csvkit/cli.ts\n"
        "error: TS2345 [ERROR]: Argument of type 'string | undefined' is not assignable to type 'string'.\n"
        "  const rows = await readCsv(args.input);\n"
        "    at file:///home/rui/csvkit/cli.ts:31:30\n\n"
        "TS2322 [ERROR]: Type 'number | undefined' is not assignable to type 'number'.\n"
        "    at file:///home/rui/csvkit/src/select.ts:22:5\n\nFound 2 errors.\n"
    )
    t = (
        Transcript("s1", cwd="/home/rui/csvkit")
        .prompt("the type check fails since the --input merge")
        .bash("deno check mod.ts cli.ts", red, code=1)
        .edit("cli.ts", "readCsv(args.input)", "readCsv(args.input ?? usage())")
        .edit(
            "src/select.ts",
            "return idx;",
            "if (idx === undefined) throw new RangeError('unknown column');\n  return idx;",
        )
        .bash("deno check mod.ts cli.ts", "Check file:///home/rui/csvkit/cli.ts\n")
    )
    titles = sorted(f.title for f in of_rule(capture(t), "failure_fix"))
    assert titles == ["Fix for TS2322 in select.ts", "Fix for TS2345 in cli.ts"]


def test_a_pass_after_the_user_gave_the_work_up_is_no_fix() -> None:
    t = (
        Transcript("s1")
        .prompt("bump ptime to 1.2 and make sure the deps install")
        .edit("icalkit.opam", '"ptime" {>= "1.1.0"}', '"ptime" {>= "1.2.0"}')
        .bash(
            "opam install . --deps-only -y",
            "[ERROR] Package conflict!\n  * Missing dependency: ptime >= 1.2.0\n",
            code=5,
        )
        .prompt("leave it, Mira owns the fork. Revert the opam change and unpin, we'll do this next week.")
        .edit("icalkit.opam", '"ptime" {>= "1.2.0"}', '"ptime" {>= "1.1.0"}')
        .bash("opam pin remove -y ptime && git status --short", "Ok, ptime is no longer pinned\n")
    )
    assert "failure_fix" not in rules(capture(t))


@pytest.mark.parametrize(
    ("check", "output", "formatter"),
    [
        ("stylua --check lua/", "Diff in lua/todo/watch.lua:\n-local x=1\n+local x = 1\n", "stylua lua/ tests/"),
        (
            "gdformat --check scripts/",
            "would reformat scripts/enemy_bat.gd\n1 file would be reformatted\n",
            "gdformat scripts/enemy_bat.gd",
        ),
        (
            "shfmt -d deploy.sh",
            "--- deploy.sh.orig\n+++ deploy.sh\n@@ -1,3 +1,3 @@\n-if [ x ];then\n+if [ x ]; then\n",
            "shfmt -w deploy.sh",
        ),
    ],
)
def test_a_formatters_check_fixed_by_running_the_formatter_is_a_learning(
    check: str, output: str, formatter: str
) -> None:
    t = (
        Transcript("s1")
        .prompt("make lint green")
        .bash(check, output, code=1)
        .bash(formatter, "")
        .bash(check, "")
        .say("Formatted.")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 1 and formatter in fixes[0].content


def test_a_revert_asked_for_as_a_task_does_not_undo_the_fixes_after_it() -> None:
    t = (
        Transcript("s1")
        .prompt("revert my last change to the reset view, then make the auth tests pass")
        .edit("acme/auth/views.py", "reset_v2(request)", "reset(request)")
        .bash("pytest tests/auth -q", PYTEST_FAIL, code=1)
        .edit("acme/auth/reset.py", "user.set_password(new)", "user.set_password(new)\n    token.mark_used()")
        .bash("pytest tests/auth -q", PYTEST_PASS)
        .say("Reverted the view; tokens are single use now and the auth tests pass.")
    )
    assert len(of_rule(capture(t), "failure_fix")) == 1


def test_a_build_error_is_fixed_when_the_next_test_run_compiles_and_fails_on_a_test() -> None:
    # swift build fails, the model is edited, then swift test compiles (a test fails: another error), the controller
    # is edited and swift test passes: two lessons, each with its own edit
    build_red = (
        "Building for debugging...\n/ferry/Sources/App/Models/Booking.swift:4:7: error: non-final class 'Booking' "
        "cannot conform to 'Sendable'; use '@unchecked Sendable'\n"
    )
    test_red = (
        "/ferry/Tests/AppTests/BookingTests.swift:41: error: -[AppTests.BookingTests testFullSailingReturnsConflict] : "
        'XCTAssertEqual failed: ("201 Created") is not equal to ("409 Conflict")\n'
        "\t Executed 3 tests, with 1 failure (0 unexpected) in 0.2 (0.2) seconds\n"
    )
    t = (
        Transcript("s1", cwd="/ferry")
        .prompt("add POST /bookings that refuses a full sailing with 409")
        .bash("swift build", build_red, code=1)
        .edit("/ferry/Sources/App/Models/Booking.swift", "class Booking: Model", "final class Booking: Model")
        .bash("swift test --filter BookingTests", test_red, code=1)
        .edit("/ferry/Sources/App/Controllers/BookingController.swift", ".count()", ".sum(\\.$passengers) ?? 0")
        .bash("swift test", "\t Executed 5 tests, with 0 failures (0 unexpected) in 0.3 (0.3) seconds\n")
    )
    fixes = of_rule(capture(t), "failure_fix")
    assert len(fixes) == 2
    sendable = next(f for f in fixes if "Sendable" in f.content)
    assert "Booking.swift" in sendable.content and "BookingController.swift" not in sendable.content
    assert any("testFullSailingReturnsConflict" in f.content and "BookingController.swift" in f.content for f in fixes)
