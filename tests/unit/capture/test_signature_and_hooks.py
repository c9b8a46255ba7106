"""Error signatures across stacks, and the same steps from hook inputs as from the transcript."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ctxbus.capture.checks import only_rewrites, rewrites_files
from ctxbus.capture.edits import gist
from ctxbus.capture.engine import capture_steps
from ctxbus.capture.items import SessionFacts
from ctxbus.capture.signature import findings_by_file, signature_of
from ctxbus.capture.steps import AnswerStep, EditStep, PromptStep, RunStep, ShellStep, Step, hook_step

from ..time_budget import assert_linear
from .transcript_builder import PYTEST_FAIL, PYTEST_PASS


def test_identifiers_of_common_stacks() -> None:
    assert "TS2345" in signature_of("src/a.ts(3,4): error TS2345: Argument of type 'x'").identifiers
    assert "E0502" in signature_of("error[E0502]: cannot borrow `v` as mutable").identifiers
    assert "TestBackoff" in signature_of("--- FAIL: TestBackoff (0.00s)\nFAIL").identifiers
    assert "KeyError" in signature_of("Traceback ...\nKeyError: 'tenant'").identifiers
    pytest_sig = signature_of(PYTEST_FAIL)
    assert "tests/auth/test_reset.py::test_link_is_single_use" in pytest_sig.identifiers
    assert "TokenReused" in pytest_sig.identifiers
    assert pytest_sig.same_error(signature_of(PYTEST_FAIL.replace("0.61s", "0.70s")))
    assert not pytest_sig.same_error(signature_of("error TS2345: x"))


def test_gist_is_the_added_lines_and_what_a_rewritten_line_was() -> None:
    assert gist("a = 1\nb = 2", "a = 1\nb = 3\nc = 4") == "b = 2 -> b = 3 / c = 4"
    assert gist("timeout = 5", "retries = [1, 2, 4, 8]") == "retries = [1, 2, 4, 8]"  # unlike it: no pair


def hook(event: str, tool: str, tool_input: dict[str, object], response: object = None) -> dict[str, object]:
    return {
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_response": response,
        "tool_use_id": f"t-{tool}-{len(str(tool_input))}",
        "session_id": "s",
        "cwd": "/w",
    }


def test_hook_inputs_give_the_same_lesson() -> None:
    inputs = [
        hook("PostToolUseFailure", "Bash", {"command": "pytest -q"}) | {"error": f"Exit code 1\n{PYTEST_FAIL}"},
        hook("PostToolUse", "Edit", {"file_path": "/w/acme/auth/reset.py", "old_string": "x", "new_string": "x\ny()"}),
        hook("PostToolUse", "Bash", {"command": "pytest -q"}, {"stdout": PYTEST_PASS, "stderr": ""}),
    ]
    steps: list[Step] = [PromptStep("fix the reset link", after_answer=False)]
    steps += [s for s in (hook_step(i) for i in inputs) if s is not None]
    steps.append(AnswerStep("done"))
    assert [type(s) for s in steps[1:4]] == [RunStep, EditStep, RunStep]
    items = capture_steps(steps, SessionFacts("p", "s", "PostToolUse", "/w", datetime(2026, 1, 1, tzinfo=UTC)))
    rules = [i.provenance.rule for i in items if i.provenance]
    assert rules == ["failure_fix", "episode"]
    assert items[0].files[0].path == "acme/auth/reset.py"


def test_other_tools_and_events_are_no_steps() -> None:
    assert hook_step(hook("PostToolUse", "Read", {"file_path": "/w/a.py"})) is None
    assert hook_step(hook("PostToolUse", "Bash", {"command": "ls"}, {"stdout": "a"})) == ShellStep("ls")  # context
    assert hook_step({"hook_event_name": "Stop"}) is None
    assert hook_step({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}) == PromptStep("hi", after_answer=False)


def test_output_of_no_known_shape_is_stated_by_its_lines_that_say_what_failed() -> None:
    output = (
        "Compiling relay v0.4.0\n3 warnings emitted\n"
        'warning: variable "limit" is unused (if the variable is not meant to be used, prefix it with _)\n'
        "  lib/relay_web/plugs/rate_limit.ex:31\nCompilation failed due to warnings while using --warnings-as-errors\n"
    )
    sig = signature_of(output)
    assert sig.lines[0].startswith('warning: variable "limit" is unused')
    assert "Compilation failed due to warnings" in " ".join(sig.lines)
    assert not any(line.startswith("3 warnings") for line in sig.lines)  # a tally states no error


def test_hook_inputs_of_a_command_no_list_knows_give_its_fix_by_repetition() -> None:
    failing = "FAIL: //server:handler_test\nserver/handler_test.cc:41: Failure\n"
    inputs = [
        hook("PostToolUseFailure", "Bash", {"command": "buck2 test //server:all"})
        | {"error": f"Exit code 3\n{failing}"},
        hook("PostToolUse", "Edit", {"file_path": "/w/server/handler.cc", "old_string": "a", "new_string": "a\nb()"}),
        hook("PostToolUse", "Bash", {"command": "buck2 test //server:all"}, {"stdout": "PASSED", "stderr": ""}),
    ]
    steps: list[Step] = [PromptStep("empty bodies should get 400", after_answer=False)]
    steps += [s for s in (hook_step(i) for i in inputs) if s is not None]
    first = steps[1]
    assert isinstance(first, ShellStep) and first.failed and "handler_test.cc:41" in first.output
    items = capture_steps(steps, SessionFacts("p", "s", "PostToolUse", "/w", datetime(2026, 1, 1, tzinfo=UTC)))
    assert next(i.provenance.rule for i in items if i.provenance) == "failure_fix"


def test_codes_of_other_tools_are_read_from_the_lines_that_state_an_error() -> None:
    output = (
        "src/Ingest/RateLimitingExtensions.cs(3,1): error IDE0005: Using directive is unnecessary.\n"
        "[ERROR] Medium: StoredResponse.body() may expose internal representation [StoredResponse] EI_EXPOSE_REP\n"
        'Npgsql.PostgresException : 42P01: relation "MaintenanceWindows" does not exist\n'
        "  16     Cannot call method isPast() on Carbon|null.\n         🪪  method.nonObject\n"
        "INFO: the ISO8601 dates of BUILD_INFO are fine\n"
    )
    ids = signature_of(output).identifiers
    for code in ("IDE0005", "EI_EXPOSE_REP", "42P01", "method.nonObject"):
        assert code in ids
    assert "ISO8601" not in ids and "BUILD_INFO" not in ids  # not on a line that states an error


def test_an_error_whose_message_numbers_change_between_runs_is_the_same_error() -> None:
    first = signature_of("Error: Timed out 5000ms waiting for expect(locator).toBeVisible()\n")
    again = signature_of("Error: Timed out 15000ms waiting for expect(locator).toBeVisible()\n")
    other = signature_of("Error: Timed out 5000ms waiting for expect(locator).toHaveText()\n")
    assert first.same_error(again) and not first.same_error(other)


def test_log_levels_are_no_identifiers_and_surefire_names_the_failing_test() -> None:
    output = (
        "[INFO] Running com.acme.api.InvoiceControllerTest\n"
        "[ERROR] com.acme.api.InvoiceControllerTest.rejectsBlankCustomerId -- Time elapsed: 0.061 s <<< FAILURE!\n"
        "java.lang.AssertionError: Status expected:<400> but was:<201>\n[INFO]\n[ERROR] Failures:\n"
    )
    ids = signature_of(output).identifiers
    assert ids[0] == "InvoiceControllerTest.rejectsBlankCustomerId" and "INFO" not in ids and "ERROR" not in ids


@pytest.mark.parametrize(
    ("command", "rewrites"),
    [
        ("ruff format src", True),
        ("ruff format --check src", False),
        ("npx eslint --fix src", True),
        ("dotnet format --verify-no-changes", False),
        ("dart run build_runner build --delete-conflicting-outputs", True),
        ("sqlfluff lint models --format json", False),
        ("git format-patch HEAD~1", False),
        ("terraform fmt -recursive && terraform plan", True),
        ("swift format lint --strict --recursive Sources Tests && echo lint-ok", False),
        ("swift-format lint -r Sources", False),
        ("swift format -i -r Sources", True),
        ("./gradlew spotlessApply", True),
        ("./gradlew ktlintFormat", True),
        ("./mvnw spotless:apply", True),
        ("./gradlew spotlessCheck", False),
        ("./build.sh -t Format", True),
        ("dotnet fake build -t FormatAll", True),
        ("./build.sh -t CheckFormat", False),
        # code and schema generators
        ("npm run db:codegen", True),
        ("npx graphql-codegen", True),
        ("npm run codegen:check", False),
        ("npx graphql-codegen --check", False),
        ("buf generate", True),
        ("npx drizzle-kit generate", True),
    ],
)
def test_which_commands_rewrite_files(command: str, rewrites: bool) -> None:
    assert rewrites_files(command) is rewrites


def test_a_line_that_also_checks_is_not_only_a_rewrite() -> None:
    assert only_rewrites("sbt scalafmtAll") and only_rewrites("npx prettier --write . && npx eslint --fix .")
    assert not only_rewrites("terraform fmt -recursive && terraform plan") and not only_rewrites("pytest -q")


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        (
            "App_HiltComponents.java:142: error: [Dagger/MissingBinding] TrailRepository cannot be provided",
            "Dagger/MissingBinding",
        ),
        (
            "[error] /src/RateService.scala:31:5: error: [DisableSyntax.var] mutable state should be avoided",
            "DisableSyntax.var",
        ),
        ("fqcn[action-core]: Use FQCN for builtin module actions (get_url).", "fqcn[action-core]"),
        (
            "warning • Unused import: 'package:flutter/foundation.dart' • lib/a.dart:1:8 • unused_import",
            "unused_import",
        ),
    ],
)
def test_more_rule_id_shapes_are_identifiers(line: str, rule: str) -> None:
    assert rule in signature_of(line + "\n").identifiers


def test_a_long_error_line_keeps_its_tail_and_runs_differing_only_there_are_one_error() -> None:
    head = "PersistenceTests.swift:38: error: -[PantryPalTests.PersistenceTests testMigrationFromV2] : " + "x" * 150
    first, again = signature_of(head + " missing attribute 'unit'"), signature_of(head + " value 0x7f3a00 differs")
    assert first.headline.endswith("missing attribute 'unit'") and first.same_error(again)


def test_an_error_line_after_a_long_boilerplate_prefix_keeps_its_point() -> None:
    """Puppet's compile error says what is wrong after some 180 characters of where (rspec, the function call)."""
    line = (
        "failed: rspec: ./spec/classes/repairs_portal_spec.rb:18: error during compilation: Evaluation Error: Error "
        "while evaluating a Function Call, Class[Profile::Repairs_portal]: parameter 'db_password' expects a "
        "Sensitive[String[1]] value, got String (line: 2, column: 1) on node foo.example.com"
    )
    assert "expects a Sensitive[String[1]] value, got String" in signature_of(line + "\n").headline


def test_a_failed_tests_name_is_read_from_the_line_that_marks_it_in_many_runners_words() -> None:
    busted = "Success:        due parses ISO dates\nFail    ||      due parses relative dates like +3d\n"
    alcotest = "  [OK]     unfold   0   plain line.\n  [FAIL]        unfold              1   folded with space.\n"
    gut = "* test_add_item\n- test_stack_merges_up_to_max\n    [Failed]:  [3] expected to equal [2]\n"
    tap = "ok 1 - deploys\nnot ok 2 - rolls back on a failed health check\n"
    assert "due parses relative dates like +3d" in signature_of(busted).identifiers
    assert any("folded with space" in i for i in signature_of(alcotest).identifiers)
    assert "test_stack_merges_up_to_max" in signature_of(gut).identifiers
    assert "rolls back on a failed health check" in signature_of(tap).identifiers
    assert not signature_of("Success: 3\nFailed : 0\nErrors : 0\n").identifiers


def test_a_wrappers_own_line_is_not_the_error() -> None:
    out = "src/due.lua:12:7: unused variable 'today'\nmake: *** [Makefile:10: lint] Error 1\n"
    assert signature_of(out).headline.startswith("src/due.lua:12:7")
    out = 'FAIL unfolded value\n  Expected: `x\'\nFile "test/dune", line 2:\nError: Command exited with code 1.\n'
    assert signature_of(out).headline == "FAIL unfolded value"


def test_a_credo_finding_is_the_error_not_makes_line() -> None:
    # credo marks each finding ``┃ [R] ↘ message`` (category, priority arrow) with its place on the next line
    out = (
        "mix credo --strict\nChecking 41 source files ...\n\n  Refactoring opportunities\n┃\n"
        "┃ [R] ↘ Cond statements should contain at least two conditions besides `true`, consider using `if` instead.\n"
        "┃       lib/rota_live/shifts.ex:58:7 #(RotaLive.Shifts.sign_up)\n\n"
        "198 mods/funs, found 1 refactoring opportunity.\n\nmake: *** [Makefile:9: lint] Error 2\n"
    )
    assert "Cond statements should contain at least two conditions" in signature_of(out).headline


def test_a_scala_3_error_is_what_follows_its_location_banner() -> None:
    # scalac 3 opens each error with ``-- Error: path:line:col`` (or ``-- [E007] Type Mismatch Error: ...``): where,
    # not what; the message is in the lines after it
    out = (
        "[info] compiling 3 Scala sources to /home/t/meter/target/scala-3.5.2/classes ...\n"
        "[error] -- Error: /home/t/meter/src/main/scala/meter/Main.scala:17:6 \n"
        "[error] 17 |    .provide(\n[error]    |    ^\n[error]    |\n"
        "[error]    |──── ZLAYER ERROR ────────────────────────────────────────\n[error]    |\n"
        "[error]    | Please provide a layer for the following type:\n"
        "[error] one error found\n[error] (Compile / compileIncremental) Compilation failed\n"
    )
    assert "ZLAYER ERROR" in signature_of(out).headline


def test_flutters_announcement_of_an_exception_is_read_with_the_line_after_it() -> None:
    out = (
        "00:02 +0: HistoryScreen shows sets grouped by day\n"
        "══╡ EXCEPTION CAUGHT BY FLUTTER TEST FRAMEWORK ╞════════════════════════════════════\n"
        "The following assertion was thrown running a test:\n"
        "A Timer is still pending even after the widget tree was disposed.\n"
        "'package:flutter_test/src/binding.dart':\nFailed assertion: line 1542 pos 12: '!timersPending'\n"
        "══════════════════════════════════════════════════════════════════════════════════════\n"
        "00:02 +0 -1: HistoryScreen shows sets grouped by day [E]\n  Test failed. See exception logs above.\n"
    )
    assert "A Timer is still pending even after the widget tree was disposed" in signature_of(out).headline


def test_a_dotted_rule_before_a_colon_is_an_identifier() -> None:
    out = "-- ELM-REVIEW ERROR --- src/Page/Pickup.elm:4:34\n\n(fix) NoUnused.Variables: Imported `class` is not used\n"
    assert "NoUnused.Variables" in signature_of(out).identifiers


def test_findings_that_name_their_file_say_the_error_when_only_the_wrapper_failed_in_its_own_words() -> None:
    # perlcritic through make: no finding says "error", and make's own line says only that make failed
    out = (
        "perlcritic --profile .perlcriticrc lib/ t/\n"
        "lib/Ledger/Statements.pm: Loop iterator is not lexical at line 11, column 3.  (Severity: 5)\n"
        'lib/Ledger/Statements.pm: Expression form of "map" at line 20, column 13.  (Severity: 4)\n'
        "lib/Ledger.pm source OK\n"
        "make: *** [Makefile:12: critic] Error 2\n"
    )
    sig = signature_of(out)
    assert sig.headline.startswith("lib/Ledger/Statements.pm: Loop iterator is not lexical")
    assert all("make: ***" not in line and "source OK" not in line for line in sig.lines)
    # a wrapper's line is still the headline when nothing else says anything
    assert signature_of("make: *** [Makefile:3: test] Error 1\n").headline.startswith("make: ***")


def test_findings_with_no_space_after_the_column_are_findings_too() -> None:
    # buf lint and buf breaking print ``file:line:col:Message (RULE_ID)``
    out = (
        "buf lint\n"
        'proto/routing/v1/routing.proto:16:3:Enum zero value name "ROUTE_STATUS_UNKNOWN" should be suffixed with '
        '"_UNSPECIFIED". (ENUM_ZERO_VALUE_SUFFIX)\n'
        "make: *** [Makefile:6: proto] Error 100\n"
    )
    sig = signature_of(out)
    assert sig.key == "ENUM_ZERO_VALUE_SUFFIX"
    assert sig.headline.startswith("proto/routing/v1/routing.proto:16:3:Enum zero value name")


def test_paths_keep_route_brackets_and_plus_and_their_whole_extension() -> None:
    out = (
        "/app/src/routes/bookings/[id]/+page.server.ts\n  2:10  error  'fail' is defined but never used\n"
        "[warn] CHANGELOG.md\n[warn] src/app.html\n"
    )
    locations = signature_of(out).locations
    assert "/app/src/routes/bookings/[id]/+page.server.ts" in locations
    assert "src/app.html" in locations
    assert not any(p.endswith((".m", ".h")) for p in locations)  # never a prefix of the extension


def test_a_docker_builds_error_is_the_build_steps_own_not_buildkits_wrapper_line() -> None:
    out = (
        "#12 [build 6/6] RUN npm run build\n#12 0.512 > vite build\n#12 3.912 x Build failed in 2.66s\n"
        "#12 3.913 error during build:\n"
        '#12 3.913 src/lib/server/api.ts (1:10): "PRIVATE_API_TOKEN" is not exported by "$env/static/private", '
        'imported by "src/lib/server/api.ts".\n'
        '#12 ERROR: process "/bin/sh -c npm run build" did not complete successfully: exit code: 1\n------\n'
        'ERROR: failed to solve: process "/bin/sh -c npm run build" did not complete successfully: exit code: 1\n'
    )
    sig = signature_of(out)
    assert "is not exported by" in sig.headline and "failed to solve" not in " ".join(sig.lines)
    assert not sig.headline.startswith("#12")


def test_testify_says_its_error_on_the_line_after_error_and_gos_package_line_names_no_test() -> None:
    out = (
        "--- FAIL: TestGetRoute_NoCarrier (0.03s)\n    store_test.go:64: \n"
        "        \tError Trace:\t/home/o/svc/internal/store/store_test.go:64\n"
        "        \tError:      \tReceived unexpected error:\n"
        "        \t            \tcan't scan into dest[3] (col: carrier_code): cannot scan NULL into *string\n"
        "        \tTest:       \tTestGetRoute_NoCarrier\nFAIL\nFAIL\tgithub.com/acme/svc/internal/store\t0.388s\nFAIL\n"
    )
    sig = signature_of(out)
    assert sig.identifiers == ("TestGetRoute_NoCarrier",)
    assert "cannot scan NULL into *string" in sig.headline


def test_test_more_and_crystal_spec_name_their_failed_tests_not_their_tallies() -> None:
    prove = (
        "t/api/transfers.t ..... 1/? \n#   Failed test 'split legs sum to the total'\n"
        "#   at t/api/transfers.t line 41.\n"
        "#          got: '999'\n#     expected: '1000'\n# Looks like you failed 1 test of 9.\n"
        "Test Summary Report\n-------------------\nt/api/transfers.t   (Wstat: 512 (exited 2) Tests: 9 Failed: 1)\n"
        "  Failed tests:  5\nResult: FAIL\n"
    )
    assert signature_of(prove).identifiers[0] == "split legs sum to the total"
    crystal = (
        "Failures:\n\n  1) Admin pickups DELETE /admin/pickups/:id removes the pickup\n"
        "     Failure/Error: response.status_code.should eq 204\n\n       Expected: 204\n            got: 404\n\n"
        "20 examples, 1 failures, 0 errors, 0 pending\n\nFailed examples:\n\n"
        "crystal spec spec/routes/admin/pickups_spec.cr:5 "
        "# Admin pickups DELETE /admin/pickups/:id removes the pickup\n"
    )
    ids = signature_of(crystal).identifiers
    assert ids[0] == "Admin pickups DELETE /admin/pickups/:id removes the pickup"
    assert "examples" not in ids and "Failure/Error" not in ids


def test_steep_names_its_diagnostic_and_code_with_an_index_is_no_rule() -> None:
    out = (
        "lib/tally/counter.rb:28:8: [error] Cannot find the declaration of method: `merge`\n"
        "│ Diagnostic ID: Ruby::UndeclaredMethodDefinition\n│\n└     def merge(other)\n\n"
        "lib/tally/counter.rb:30:23: [error] Type `(::Integer | nil)` does not have method `+`\n"
        "│ Diagnostic ID: Ruby::NoMethod\n│\n└         @counts[key] = @counts[key] + n\n"
    )
    ids = signature_of(out).identifiers
    assert ids[:2] == ("Ruby::UndeclaredMethodDefinition", "Ruby::NoMethod")
    assert not any("[key]" in i for i in ids)


def test_a_jest_suite_that_failed_to_run_says_why_on_its_next_line() -> None:
    out = (
        "FAIL src/components/__tests__/OfflineBanner.test.tsx\n  ● Test suite failed to run\n\n"
        "    [@RNC/NetInfo]: NativeModule: NetInfo is null. To fix this issue try these steps:\n"
        "    * If you are getting this error while unit testing you need to mock the native module.\n\n"
        "      at Object.require (src/components/OfflineBanner.tsx:1:1)\n"
    )
    sig = signature_of(out)
    assert sig.headline.startswith("[@RNC/NetInfo]: NativeModule: NetInfo is null")
    assert "Test suite failed to run" not in sig.identifiers


def test_a_path_in_parentheses_is_the_path_not_the_parenthesis_and_route_groups_stay() -> None:
    out = "      at Object.require (src/components/Banner.tsx:1:1)\nerror in app/(shop)/cart/page.tsx:3:1 boom\n"
    assert signature_of(out).locations == ("src/components/Banner.tsx", "app/(shop)/cart/page.tsx")


GRADLE_TEST_FAILED = """> Task :test

RouteControllerTest > createsRouteWithStops() FAILED
    io.micronaut.http.client.exceptions.HttpClientResponseException at RouteControllerTest.java:48

2 tests completed, 1 failed

> Task :test FAILED

FAILURE: Build failed with an exception.

* What went wrong:
Execution failed for task ':test'.
> There were failing tests. See the report at: file:///home/t/src/routes/build/reports/tests/test/index.html

BUILD FAILED in 21s
5 actionable tasks: 4 executed, 1 up-to-date
"""


def test_gradles_closing_verdict_is_no_headline() -> None:
    # "BUILD FAILED in 21s" says that it failed and how long it took, not what failed (and differs run by run)
    sig = signature_of(GRADLE_TEST_FAILED)
    assert "BUILD FAILED" not in sig.headline and not any("BUILD FAILED" in line for line in sig.lines)
    assert "createsRouteWithStops" in sig.headline or "HttpClientResponseException" in sig.headline
    assert sig.same_error(signature_of(GRADLE_TEST_FAILED.replace("in 21s", "in 34s")))


def test_a_failed_subtest_is_named_by_its_path_not_only_its_parent() -> None:
    out = (
        "--- FAIL: TestShiftSuite (0.38s)\n    --- FAIL: TestShiftSuite/TestOverlappingShiftRejected (0.09s)\n"
        "        shifts_test.go:26:\n            \tError:      \tNot equal:\nFAIL\n"
    )
    ids = signature_of(out).identifiers
    assert ids[0] == "TestShiftSuite/TestOverlappingShiftRejected"
    assert "TestShiftSuite" not in ids  # the parent failed because its subtest did


def test_minitest_names_its_failed_test_under_the_failure_heading() -> None:
    out = (
        "  1) Failure:\nSwapMatcherTest#test_notify_watchers_skips_when_quantity_missing "
        "[test/services/swap_matcher_test.rb:44]:\nExpected: 0\n  Actual: 1\n\n15 runs, 21 assertions, 1 failures\n"
    )
    assert "SwapMatcherTest#test_notify_watchers_skips_when_quantity_missing" in signature_of(out).identifiers


def test_node_tests_failed_test_is_named_but_not_eslints_tally_or_nodes_heading() -> None:
    out = (
        "\u25b6 POST /bookings\n  \u2716 rejects a booking that overlaps an existing one (31.2ms)\n"
        "    AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n"
        "\u2716 failing tests:\n\ntest at test/bookings.test.ts:26:3\n"
    )
    ids = signature_of(out).identifiers
    assert "rejects a booking that overlaps an existing one" in ids
    assert not any("failing tests" in i for i in ids)
    assert (
        "3 problems (3 errors, 0 warnings)"
        not in signature_of("\u2716 3 problems (3 errors, 0 warnings)\n").identifiers
    )


def test_a_json_log_lines_error_is_read_as_its_type_message_and_code() -> None:
    # pino (Fastify's logger) at level 50, as a test run prints it: the error object says what failed
    out = (
        "\u2716 marks the booking paid (18.3ms)\n"
        '{"level":50,"time":1763457102118,"pid":51877,"reqId":"req-1","err":{"type":"DatabaseError",'
        '"message":"conflicting key value violates exclusion constraint \\"bookings_no_overlap\\"","code":"23P01",'
        '"stack":"DatabaseError: conflicting key value\\n    at Parser.parseErrorMessage"},"msg":"conflicting key"}\n'
    )
    sig = signature_of(out)
    assert "23P01" in sig.identifiers and "DatabaseError" in sig.identifiers
    assert any(line.startswith("DatabaseError: conflicting key value violates exclusion") for line in sig.lines)
    structlog = '{"event": "payment failed", "level": "error", "exc_info": "Traceback ...", "error": "CardDeclined"}'
    assert "CardDeclined" in signature_of(structlog).identifiers
    info = '{"level":30,"msg":"request completed","err":{"type":"CacheStale","message":"fine","code":"W42"}}'
    assert not signature_of(info).identifiers and not signature_of(info).lines


def test_javacs_bracketed_category_of_a_located_finding_is_an_identifier() -> None:
    # Error Prone and javac -Xlint through maven: a warning that -Werror makes an error
    out = (
        "[WARNING] /src/main/java/io/acme/ClaimNotifier.java:[31,9] [MissingCasesInEnumSwitch] Non-exhaustive "
        "switch; either add a default or handle the remaining cases: ESCALATED\n"
        "[WARNING] /src/main/java/io/acme/Old.java:[12,5] [deprecation] foo() in Bar has been deprecated\n"
        "[ERROR] COMPILATION ERROR :\n[ERROR] warnings found and -Werror specified\n"
        "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.13.0:compile "
        "(default-compile) on project claims: Compilation failure\n"
    )
    sig = signature_of(out)
    assert sig.identifiers[:2] == ("MissingCasesInEnumSwitch", "deprecation")
    assert sig.headline.startswith(
        "[WARNING] /src/main/java/io/acme/ClaimNotifier.java:[31,9] [MissingCasesInEnumSwitch]"
    )


def test_a_wrappers_exception_does_not_make_two_errors_one() -> None:
    # Nuke (and Gradle, Maven, execa, subprocess) raise their own exception when the tool they ran failed
    nuke = "\n\nProcessException: Process 'dotnet' exited with code 1.\n   > /usr/bin/dotnet test\n"
    compile_error = "src/Api/Request.cs(9,19): error CS8618: Non-nullable property 'Name' must contain a value" + nuke
    test_failure = "  Failed BookFiring_rejects_overlapping_slot [12 ms]\n  Assert.AreEqual failed." + nuke
    assert not signature_of(compile_error).same_error(signature_of(test_failure))
    assert signature_of(compile_error).same_error(signature_of(compile_error.replace("(9,19)", "(10,19)")))
    # the wrapper's exception alone still names the error when nothing else does
    assert signature_of(nuke).same_error(signature_of(nuke))
    assert signature_of(compile_error).identifiers[0] == "CS8618"


def test_a_rule_in_a_findings_docs_link_is_named() -> None:
    # revive's friendly formatter: the rule (a docs link's fragment) and message, then the place on a line of its own
    out = (
        "  \u26a0  https://revive.run/r#exported  exported type Mapbox should have comment or be unexported\n"
        "  internal/geocode/mapbox.go:10:6\n\n \u26a0 1 problem (0 errors, 1 warning)\n"
    )
    assert "exported" in signature_of(out).identifiers
    assert "docs" not in signature_of("see https://example.com/guide#docs for more\n").identifiers


def test_an_announced_error_is_read_with_the_first_line_that_says_something() -> None:
    # wasm-bindgen: ``error: `` then a blank line, then what is wrong
    out = (
        "[cargo-make] INFO - Running Task: wasm-bindgen\nerror: \n\nit looks like the Rust project used to create "
        "this wasm file was linked against\nversion of wasm-bindgen that uses a different bindgen format\n"
        "[cargo-make] ERROR - Error while executing command, exit code: 1\n"
    )
    assert signature_of(out).headline.startswith("error: it looks like the Rust project used to create this wasm")


def test_a_phpcs_sniff_code_on_its_findings_last_line_is_an_identifier() -> None:
    out = (
        "FILE: /app/includes/class-bookings-repository.php\n"
        ' 41 | ERROR | Use placeholders and $wpdb->prepare(); found interpolated variable {$day} at "SELECT\n'
        "    |       | stall_id FROM {$this->table} WHERE market_day = '{$day}'\"\n"
        "    |       | (WordPress.DB.PreparedSQL.InterpolatedNotPrepared)\n"
        " 12 | WARNING | Line exceeds 120 characters; contains 131 characters (Generic.Files.LineLength.TooLong)\n"
    )
    ids = signature_of(out).identifiers
    assert ids[:2] == ("WordPress.DB.PreparedSQL.InterpolatedNotPrepared", "Generic.Files.LineLength.TooLong")
    assert "Foo.bar" not in signature_of("see (Foo.bar) for details\n").identifiers


def test_xctests_failed_test_is_named() -> None:
    mac = (
        "/ferry/Tests/AppTests/BookingTests.swift:41: error: -[AppTests.BookingTests testFullSailingReturnsConflict] "
        ': XCTAssertEqual failed: ("201 Created") is not equal to ("409 Conflict")\n'
        "Test Case '-[AppTests.BookingTests testFullSailingReturnsConflict]' failed (0.052 seconds).\n"
    )
    linux = "Test Case 'BookingTests.testRejectsPastSailing' failed (0.011 seconds)\n"
    assert signature_of(mac).identifiers[0] == "BookingTests.testFullSailingReturnsConflict"
    assert "BookingTests.testRejectsPastSailing" in signature_of(linux).identifiers
    assert not signature_of("Test Case '-[AppTests.BookingTests testOk]' passed (0.01 seconds).\n").identifiers


def test_runs_of_blank_lines_and_very_long_lines_are_read_in_linear_time() -> None:
    # many patterns start ``^\s*``: from each line start of a run of blank lines they read the whole run (quadratic)
    blank = "1) Failure:" + "\n" * 4_000 + "FAILED tests/test_a.py::test_x - KeyError: 'k'\n"
    sig = signature_of(blank)
    assert "tests/test_a.py::test_x" in sig.identifiers and "KeyError" in sig.identifiers
    long_line = "-Werror\nwarning: " + ("a." * 4_000) + "\nsrc/a.c:3:5: error: expected ';'\n"
    assert signature_of(long_line).headline == "src/a.c:3:5: error: expected ';'"
    assert_linear(signature_of, lambda n: "1) Failure:" + "\n" * n + "x")
    assert_linear(signature_of, lambda n: "-Werror\nwarning: " + ("a." * n)[:n])
    assert_linear(signature_of, lambda n: "".join(f"--- FAIL: T{i}/S{i}\n" for i in range(n // 16)))
    assert_linear(findings_by_file, lambda n: " \n" * (n // 2))
    wrapped = "Error: the module at /a/b/c/d/e/f/g/h/i/j/k was compiled against\nthe version using\n"
    assert_linear(signature_of, lambda n: wrapped * (n // len(wrapped)))
    assert_linear(signature_of, lambda n: "Traceback (most recent call last):\n" + "  x\n" * (n // 4))
    failed = "  ✘  {} e/a.spec.ts:8:3 › s › t " + "x " * 20 + "(1s)\n"
    assert_linear(signature_of, lambda n: "".join(failed.format(i) for i in range(n // 64)))
    assert_linear(signature_of, lambda n: ("is not a " * n)[:n])


def test_an_error_message_node_wrapped_over_lines_is_read_whole() -> None:
    out = (
        "FAIL tests/main/tags.test.ts\n  ● Test suite failed to run\n\n"
        "    Error: The module '/Users/m/dev/app/node_modules/better-sqlite3/build/Release/better_sqlite3.node'\n"
        "    was compiled against a different Node.js version using\n"
        "    NODE_MODULE_VERSION 127. This version of Node.js requires\n"
        "    NODE_MODULE_VERSION 136. Please try re-compiling or re-installing\n"
        "    the module (for instance, using `npm rebuild` or `npm install`).\n"
        "        at process.func [as dlopen] (node:electron/js2c/node_init:2:2617)\n"
        "        at Module._extensions..node (node:internal/modules/cjs/loader:1930:18)\n"
    )
    sig = signature_of(out)
    assert "NODE_MODULE_VERSION 127" in sig.headline, sig.headline
    assert "at process.func" not in sig.headline


def test_a_complete_error_line_is_not_joined_to_the_lines_after_it() -> None:
    out = (
        "TypeError: Cannot read properties of undefined (reading 'id')\n"
        "    at render (src/components/List.tsx:12:5)\n"
        "AssertionError: expected 2 to equal 3\n"
        "expected: 3\n"
    )
    sig = signature_of(out)
    assert sig.headline == "TypeError: Cannot read properties of undefined (reading 'id')"
    assert "AssertionError: expected 2 to equal 3" in sig.lines  # a short line: not a wrapped one


def test_the_exception_a_python_traceback_ends_on_names_the_error_before_constants_in_logs() -> None:
    out = (
        "tests/test_flows.py F.\n=================================== FAILURES ===================================\n"
        "___________________ test_runs_each_spider_as_its_own_task ___________________\n"
        '        lambda: Settings({"SPIDER_MODULES": ["tests.stubs"], "ITEM_PIPELINES": {}, "LOG_LEVEL": "WARNING"}),\n'
        ">       assert state.is_completed()\nE       assert False\n\ntests/test_flows.py:30: AssertionError\n"
        "------------------------------ Captured log call -------------------------------\n"
        "ERROR    prefect.task_runs:task_runs.py:2099 Encountered exception during execution:\n"
        "Traceback (most recent call last):\n"
        '  File "/home/p/code/app/src/app/flows/nightly.py", line 22, in crawl_spider\n'
        "    process.start()  # blocks until the spider has closed\n"
        '  File "/home/p/code/app/.venv/lib/python3.12/site-packages/twisted/internet/base.py", line 843, in start\n'
        "    raise error.ReactorNotRestartable()\n"
        "twisted.internet.error.ReactorNotRestartable\n"
        "WARNING  prefect.task_runs:nightly.py:36 TENDERS_SLACK_WEBHOOK not set; summary not posted\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_flows.py::test_runs_each_spider_as_its_own_task - assert False\n"
        "========================= 1 failed, 1 passed in 6.12s ==========================\n"
    )
    ids = signature_of(out).identifiers
    assert "ReactorNotRestartable" in ids, ids
    # the failed test's id with its message is the same test, not another identifier
    assert "tests/test_flows.py::test_runs_each_spider_as_its_own_task - assert False" not in ids


PLAYWRIGHT_FAILED = (
    "Error: Exit code 1\n> app@0.9.2 test:e2e\n> playwright test --grep export\n\nRunning 1 test using 1 worker\n\n"
    "[pageerror] window.shoreline.exportSelection is not a function\n"
    "  ✘  1 e2e/export.spec.ts:8:3 › export › exports the selection as a zip (17.1s)\n\n"
    "  1) e2e/export.spec.ts:8:3 › export › exports the selection as a zip ─────────────────────────\n\n"
    "    Error: expect(locator).toBeVisible() failed\n\n    Locator:  getByText('Exported 2 photos')\n"
    "    Expected: visible\n    Timeout:  15000ms\n    Error: element(s) not found\n\n"
    "  1 failed\n    e2e/export.spec.ts:8:3 › export › exports the selection as a zip ──────────────────────────\n"
)


def test_playwrights_failed_test_is_named_by_its_title_path() -> None:
    ids = signature_of(PLAYWRIGHT_FAILED).identifiers
    assert ids[0] == "export › exports the selection as a zip", ids


def test_the_tool_results_exit_code_is_never_an_identifier() -> None:
    assert "Exit code 1" not in signature_of(PLAYWRIGHT_FAILED).identifiers
    assert signature_of("Error: Exit code 2\nsomething broke\n").identifiers == ()


def test_a_javascript_runtime_error_message_is_an_error_line() -> None:
    lines = signature_of(PLAYWRIGHT_FAILED).lines
    assert any("exportSelection is not a function" in line for line in lines), lines
    out = "console.error\n  Uncaught: Cannot read properties of undefined (reading 'map')\n"
    assert "Cannot read properties of undefined" in signature_of(out).headline


FAKE_CHECK_FORMAT = (
    "Starting target 'CheckFormat'\n/usr/share/dotnet/dotnet fantomas --check src tests build (In: false, Out: false)\n"
    "The following files aren't formatted properly:\n- /home/s/src/api/src/Api/Db.fs\n"
    "Finished (Failed) 'CheckFormat' in 00:00:02.8812004\n\nStatus:        Failure\n"
    "Script reported an error:\n-> BuildFailedException: Target 'CheckFormat' failed.\n"
    "-> One or more errors occurred. (dotnet fantomas --check src tests build failed with exit code 99)\n"
    "-> Exception: dotnet fantomas --check src tests build failed with exit code 99\n"
)


def test_a_formatter_checks_statement_is_the_error_and_the_build_scripts_exception_comes_last() -> None:
    sig = signature_of(FAKE_CHECK_FORMAT)
    assert "aren't formatted properly" in sig.headline and "Db.fs" in sig.headline, sig.headline
    assert sig.key != "BuildFailedException"


def test_expectos_failed_test_is_named() -> None:
    out = (
        "[14:03:02 INF] EXPECTO? Running tests... <Expecto>\n"
        "[14:05:16 ERR] bookings/back-to-back stays are allowed failed in 00:00:00.0152115.\nstatus.\n"
        "expected: Created\n  actual: Conflict\n"
        "  /home/s/src/api/tests/Api.Tests/BookingTests.fs(43,1): Api.Tests.BookingTests.tests@51-14.MoveNext()\n"
        " <Expecto>\n[14:03:06 INF] EXPECTO! 32 tests run in 00:00:03.66 for all – 31 passed, 0 ignored, 1 failed, "
        "0 errored. Failed! <Expecto>\n"
        "Script reported an error:\n-> BuildFailedException: Target 'Test' failed.\n"
    )
    sig = signature_of(out)
    assert sig.key == "bookings/back-to-back stays are allowed", sig.identifiers
    assert "BuildFailedException" not in sig.headline  # the build script's own line says least


def test_sbts_log_level_prefixes_are_no_identifiers_and_its_tests_failed_exception_is_a_wrappers() -> None:
    out = (
        "[info] welcome to sbt 1.11.6 (Eclipse Adoptium Java 21.0.8)\n[info] compiling 1 Scala source ...\n"
        "[info] RepairControllerSpec:\n[info] - should list a tenant's repairs *** FAILED ***\n"
        "[info]   404 did not equal 200 (RepairControllerSpec.scala:41)\n"
        "[error] Failed tests:\n[error] \tcontrollers.RepairControllerSpec\n"
        "[error] (Test / test) sbt.TestsFailedException: Tests unsuccessful\n"
    )
    ids = signature_of(out).identifiers
    assert not any(i.strip("[]").lower() in {"info", "error", "warn"} for i in ids), ids
    assert signature_of(out).key != "TestsFailedException", ids


def test_scalatests_message_under_a_failed_test_is_the_error_not_sbts_summary() -> None:
    output = (
        "[info] RepairsControllerSpec:\n[info] - should show a repair (41 milliseconds)\n"
        "[info] - should return the history of a repair *** FAILED *** (41 milliseconds)\n"
        "[info]   404 was not equal to 200 (RepairsControllerSpec.scala:58)\n"
        "[info] - should update the status (33 milliseconds)\n[info] *** 1 TEST FAILED ***\n"
        "[error] Failed tests:\n[error] \tcontrollers.RepairsControllerSpec\n"
        "[error] (Test / test) sbt.TestsFailedException: Tests unsuccessful\n"
    )
    sig = signature_of(output)
    assert "should return the history of a repair" in sig.identifiers
    assert "404 was not equal to 200" in sig.headline


def test_n_a_at_a_log_lines_end_is_no_lint_rule() -> None:
    output = (
        "2025-11-07 09:38:53,805 52110 INFO test_db odoo.addons.base.models.ir_module: ALLOW access to "
        "module.update_list on [] to user __system__ #1 via n/a\n"
        "  12:5  error  Promises must be awaited  @typescript-eslint/no-floating-promises\n"
        "  14:1  error  Missing key  react/jsx-key\n"
    )
    ids = signature_of(output).identifiers
    assert "n/a" not in ids and "@typescript-eslint/no-floating-promises" in ids and "react/jsx-key" in ids


def test_a_rails_minitest_failure_is_named_by_its_test_and_stated_by_its_message() -> None:
    output = (
        "Running 7 tests in a single process (parallelization threshold is 50)\nRun options: --seed 52718\n\n"
        "# Running:\n\n..F\n\nFailure:\n"
        "BookingTest#test_back-to-back_bookings_are_allowed [test/models/booking_test.rb:33]:\n"
        "Main hall is already booked at that time\n\n\nbin/rails test test/models/booking_test.rb:29\n\n....\n\n"
        "7 runs, 10 assertions, 1 failures, 0 errors, 0 skips\n"
    )
    sig = signature_of(output)
    assert sig.identifiers[0] == "BookingTest#test_back-to-back_bookings_are_allowed"
    assert sig.headline == "Main hall is already booked at that time"


def test_a_brakeman_warning_is_named_by_its_category_and_stated_by_its_message() -> None:
    output = (
        "== Warnings ==\n\nConfidence: High\nCategory: SQL Injection\nCheck: SQL\nMessage: Possible SQL injection\n"
        "Code: Booking.where(\"date(starts_at) = '#{params[:on]}'\")\nFile: app/controllers/bookings_controller.rb\n"
        "Line: 6\n"
    )
    sig = signature_of(output)
    assert sig.identifiers[0] == "SQL Injection" and sig.headline == "SQL Injection: Possible SQL injection"


def test_web_ext_lints_first_error_is_named_by_its_code() -> None:
    output = (
        "Validation Summary:\n\nerrors          1              \nnotices         0              \n\nERRORS:\n\n"
        "Code                    Message                  Description                                File\n"
        "EXTENSION_ID_REQUIRED   The extension ID is      Manifest Version 3 and above require the   manifest.json\n"
        "                        required in Manifest     extension ID to be set.\n"
    )
    sig = signature_of(output)
    assert sig.identifiers[0] == "EXTENSION_ID_REQUIRED" and sig.headline.startswith("EXTENSION_ID_REQUIRED: The")
