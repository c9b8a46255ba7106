"""The failure_fix rule: which error the edits fixed, and what fixed an error when no edit did."""

from __future__ import annotations

from ctxbus.memory.model import MemoryItem

from .transcript_builder import Transcript, capture, of_rule

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
    return of_rule(capture(t), "failure_fix")


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


DETEKT_FAILS = (
    "> Task :detekt FAILED\n"
    "/home/s/inv/src/main/kotlin/inv/ReservationService.kt:23:18: The caught exception is too generic. "
    "[TooGenericExceptionCaught]\n\nFAILURE: Build failed with an exception.\nBUILD FAILED in 9s\n"
)
GRADLE_PASSES = "> Task :detekt\n> Task :test\n\nBUILD SUCCESSFUL in 31s\n"


def test_one_gradle_line_that_runs_several_tasks_verifies_each_tasks_errors() -> None:
    t = (
        Transcript("s1", cwd="/home/s/inv")
        .prompt("detekt fails on main, fix it")
        .bash("./gradlew detekt", DETEKT_FAILS, code=1)
        .edit(
            "/home/s/inv/src/main/kotlin/inv/ReservationService.kt", "catch (e: Exception)", "catch (e: SQLException)"
        )
        .bash("./gradlew detekt test", GRADLE_PASSES)
        .say("detekt and the tests pass.")
    )
    (fix,) = fixes(t)
    assert "TooGenericExceptionCaught" in fix.title


def test_a_test_that_fails_again_with_another_error_is_learned_with_the_error_its_fix_fixed() -> None:
    first = (
        "FAILED tests/tasks/test_email.py::test_sent_once - kombu.exceptions.OperationalError: Error 111 connecting\n"
        "1 failed in 0.4s\n"
    )
    then = (
        "FAILED tests/tasks/test_email.py::test_sent_once - celery.exceptions.NotRegistered: 'app.tasks_email.send'\n"
        "1 failed in 0.3s\n"
    )
    t = (
        Transcript("s1", cwd="/home/m/app")
        .prompt("add a send_delivery_email task and test it")
        .bash("pytest tests/tasks -q", first, code=1)
        .edit("/home/m/app/tests/tasks/test_email.py", "", "app.conf.task_always_eager = True")
        .bash("pytest tests/tasks -q", then, code=1)
        .edit("/home/m/app/app/celery_app.py", 'include=["app.tasks"]', 'include=["app.tasks", "app.tasks_email"]')
        .bash("pytest tests/tasks -q", "2 passed in 0.3s\n")
        .say("The task is registered and its test passes.")
    )
    (fix,) = fixes(t)
    assert "NotRegistered" in fix.content and "OperationalError" in fix.content


KONDO_FAILS = (
    "src/quotes/handlers.clj:22:7: error: Unresolved symbol: respons\n"
    "src/quotes/db.clj:4:5: warning: namespace next.jdbc.result-set is required but never used\n"
    "linting took 412ms, errors: 1, warnings: 1\nmake: *** [Makefile:9: lint] Error 3\n"
)


def test_an_error_and_a_warning_in_two_files_each_fixed_in_its_own_are_two_learnings() -> None:
    t = (
        Transcript("s1", cwd="/home/i/quotes")
        .prompt("CI is red on the lint step, fix it")
        .bash("make lint", KONDO_FAILS, code=2)
        .edit("/home/i/quotes/src/quotes/handlers.clj", "(respons 200)", "(response 200)")
        .edit("/home/i/quotes/src/quotes/db.clj", "[next.jdbc.result-set :as rs]", "")
        .bash("make lint", "linting took 398ms, errors: 0, warnings: 0\n")
        .say("Lint is clean.")
    )
    by_file = {("handlers.clj" in i.title): i for i in fixes(t)}
    assert set(by_file) == {True, False}
    assert "Unresolved symbol" in by_file[True].content and "required but never used" in by_file[False].content


def test_another_subcommand_of_the_same_tool_passing_before_any_change_does_not_close_the_error() -> None:
    failed = (
        '[error] Migration DoctrineMigrations\\Version20260925151204 failed during Execution. Error: "An exception '
        'occurred while executing a query: SQLSTATE[42701]: Duplicate column: 7 ERROR:  column "sku" of relation '
        '"product" already exists"\n'
    )
    t = (
        Transcript("s1", cwd="/home/n/shop")
        .prompt("I added a sku field to Product and generated a migration but migrate fails locally. can you look")
        .bash("bin/console doctrine:migrations:migrate -n", failed, code=1)
        .bash("bin/console doctrine:migrations:status", ">> Executed: 12\n>> New: 1\n")
        .edit("/home/n/shop/migrations/Version20260925151204.php", "ADD sku VARCHAR(32)", "")
        .bash("bin/console doctrine:migrations:migrate -n", "[notice] finished in 41ms, used 14M memory\n")
        .say("The duplicate migration no longer adds the column; migrate passes.")
    )
    (fix,) = fixes(t)
    assert "42701" in fix.content and "Version20260925151204.php" in fix.content


TSC_TWO = (
    "> shop@0.7.0 typecheck\n> react-router typegen && tsc\n\n"
    "app/routes/cart.tsx:1:16 - error TS2305: Module '\"react-router\"' has no exported member 'json'.\n\n"
    "app/routes/cart.tsx:2:28 - error TS2307: Cannot find module './+types/cart' or its corresponding type "
    "declarations.\n\nFound 2 errors in the same file, starting at: app/routes/cart.tsx:1\n"
)
TSC_ONE = (
    "> shop@0.7.0 typecheck\n> react-router typegen && tsc\n\n"
    "app/routes/cart.tsx:2:28 - error TS2307: Cannot find module './+types/cart' or its corresponding type "
    "declarations.\n\nFound 1 error in app/routes/cart.tsx:2\n"
)


def test_an_error_a_rerun_no_longer_shows_was_fixed_by_the_edits_before_it_the_rest_by_the_edits_after() -> None:
    t = (
        Transcript("s1", cwd="/home/m/shop")
        .prompt("port the basket page to this app")
        .write("/home/m/shop/app/routes/cart.tsx", 'import { Form, json } from "react-router";\n')
        .bash("npm run typecheck", TSC_TWO, code=2)
        .edit("/home/m/shop/app/routes/cart.tsx", "import { Form, json }", "import { data, Form }")
        .bash("npm run typecheck", TSC_ONE, code=2)
        .edit("/home/m/shop/app/routes.ts", 'route("teas/:slug")', 'route("teas/:slug"), route("cart")')
        .bash("npm run typecheck", "> shop@0.7.0 typecheck\n> react-router typegen && tsc\n")
        .say("Typecheck passes.")
    )
    found = {i.title: i for i in fixes(t)}
    assert len(found) == 2, list(found)
    ts2305 = next(i for i in found.values() if "TS2305" in i.title)
    ts2307 = next(i for i in found.values() if "TS2307" in i.title)
    assert "cart.tsx" in ts2305.title and "routes.ts" not in ts2305.content
    assert "routes.ts" in ts2307.title and "TS2305" not in ts2307.content


def test_what_a_rerun_that_also_rewrote_files_no_longer_shows_is_not_credited_to_the_edits_before_it() -> None:
    both = (
        "standard: Run `standardrb --fix` to potentially fix one problem.\n"
        "  lib/tally/report.rb:3:9: Style/StringLiterals: Prefer double-quoted strings.\n"
        "  lib/tally/report.rb:14:5: Lint/UselessAssignment: Useless assignment to variable - `width`.\n"
    )
    one = "  lib/tally/report.rb:14:5: Lint/UselessAssignment: Useless assignment to variable - `width`.\n"
    t = (
        Transcript("s1", cwd="/home/r/tally")
        .prompt("the lint job is red, fix it")
        .bash("bundle exec standardrb", both, code=1)
        .edit("/home/r/tally/.standard.yml", "ruby_version: 3.2\n", "ruby_version: 3.2\nignore: []\n")
        .bash("bundle exec standardrb --fix", one, code=1)
        .edit("/home/r/tally/lib/tally/report.rb", "width = 10\n", "")
        .bash("bundle exec standardrb", "")
        .say("Lint passes.")
    )
    assert not any("Style/StringLiterals" in i.title for i in fixes(t))


BLOCKING_FAILS = (
    "FAILED tests/test_sensor.py::test_soil_moisture - RuntimeError: Caught blocking call to putrequest "
    "with args (...) inside the event loop by integration 'verdant' at custom_components/verdant/api.py, line 52\n"
    "1 failed, 7 passed in 1.21s\n"
)


def test_a_fix_the_user_rejects_right_after_is_replaced_by_the_fix_that_follows() -> None:
    t = (
        Transcript("s1", cwd="/home/r/ha")
        .prompt("add a rain delay sensor")
        .edit("/home/r/ha/custom_components/verdant/api.py", "", "def rain_delay(self): return requests.get(...)")
        .bash("pytest", BLOCKING_FAILS, code=1)
        .edit("/home/r/ha/custom_components/verdant/coordinator.py", "self.client.status()", "await executor(...)")
        .bash("pytest", "8 passed in 1.02s\n")
        .say("Tests pass: the client runs in an executor job.")
        .prompt("no, don't paper over it with executor jobs. always use the shared aiohttp session, never requests.")
        .write("/home/r/ha/custom_components/verdant/api.py", "async def rain_delay(self): ...aiohttp...\n")
        .edit("/home/r/ha/custom_components/verdant/coordinator.py", "await executor(...)", "await client.status()")
        .bash("pytest", "8 passed in 1.00s\n")
        .say("Rewritten on aiohttp; tests pass.")
    )
    (fix,) = fixes(t)
    assert "api.py" in fix.title and "executor" not in fix.content, fix.content


def executor_fix() -> Transcript:
    """A failing test fixed by running the blocking client in an executor job, verified: what the user rejects."""
    return (
        Transcript("s1", cwd="/home/r/ha")
        .prompt("add a rain delay sensor")
        .bash("pytest", BLOCKING_FAILS, code=1)
        .edit("/home/r/ha/custom_components/verdant/coordinator.py", "self.client.status()", "await executor(...)")
        .bash("pytest", "8 passed in 1.02s\n")
        .say("Tests pass.")
    )


def test_a_rejected_fix_that_nothing_replaces_stays_the_lesson() -> None:
    t = (
        executor_fix()
        .prompt("no, wait, first tell me what the sensor will be called")
        .say("It will be sensor.verdant_rain_delay.")
    )
    (fix,) = fixes(t)
    assert "coordinator.py" in fix.title


def test_a_rejection_of_later_work_leaves_the_fix_before_it_alone() -> None:
    t = (
        Transcript("s1", cwd="/home/j/tomlq")
        .prompt("quoted segments fail, fix it, and make hlint happy")
        .bash("cabal test", "parses dotted keys with quoted segments [✘]\n1 example failed\n", code=1)
        .edit("/home/j/tomlq/src/Tomlq/Query.hs", "some (satisfy isKeyChar)", "quoted <|> bare")
        .bash("cabal test", "17 examples, 0 failures\n")
        .bash("hlint src", "src/Tomlq/Render.hs:33:17-42: Warning: Use concatMap\n1 hint\n", code=1)
        .edit("/home/j/tomlq/src/Tomlq/Eval.hs", "lookupPath", '{-# ANN lookupPath "HLint: ignore" #-}')
        .prompt("no ANN pragmas please, a hint we disagree with goes in .hlint.yaml")
        .edit("/home/j/tomlq/.hlint.yaml", "", "- ignore: {name: Use concatMap}")
        .bash("hlint src && cabal test", "No hints\n17 examples, 0 failures\n")
    )
    assert any("Query.hs" in i.title for i in fixes(t))


def test_a_rejected_fix_whose_check_passes_again_with_nothing_changed_stays_the_lesson() -> None:
    t = (
        executor_fix()
        .prompt("no wait, run the whole suite once more before I look")
        .bash("pytest", "8 passed in 1.01s\n")
        .say("Still green.")
    )
    (fix,) = fixes(t)
    assert "coordinator.py" in fix.title


VITEST_COMPONENTS_FAIL = (
    " RUN  v3.0.5 /home/dev/shifts\n\n ❯ src/components/ShiftCard.test.tsx (3 tests | 3 failed) 24ms\n"
    "   × <ShiftCard> > shows the spots left 13ms\n"
    "     → Client-only API called on the server side. Run client-only code in onMount\n\n"
    " Test Files  1 failed (1)\n      Tests  3 failed (3)\n"
)
NPM_TEST_PASSES = (
    "\n> shifts@0.3.0 test\n> vitest run\n\n RUN  v3.0.5 /home/dev/shifts\n\n"
    " ✓ src/components/ShiftCard.test.tsx (3 tests) 41ms\n ✓ src/server/repo.test.ts (4 tests) 171ms\n\n"
    " Test Files  2 passed (2)\n      Tests  7 passed (7)\n"
)
NPM_TEST_FAILS = (
    "\n> shifts@0.3.0 test\n> vitest run\n\n" + VITEST_COMPONENTS_FAIL.split("\n\n", 1)[1] + "npm ERR! code 1\n"
)
VITEST_PASSES = " RUN  v3.0.5 /home/dev/shifts\n\n ✓ src/components/ShiftCard.test.tsx (3 tests) 41ms\n"


def component_fix(failing: tuple[str, str], passing: tuple[str, str]) -> Transcript:
    return (
        Transcript("s1", cwd="/home/dev/shifts")
        .prompt("add a ShiftCard component with a test")
        .bash(failing[0], failing[1], code=1)
        .edit("/home/dev/shifts/vitest.config.ts", "resolve: {", "resolve: {\n    conditions: ['browser'],")
        .bash(*passing)
        .say("The component tests pass: vitest now resolves solid-js's browser build.")
    )


def test_a_script_that_runs_the_failing_tool_verifies_its_fix() -> None:
    """``npm test`` echoes ``> vitest run``: its pass is a (wider) run of the vitest that failed, not another program
    passing where the code did not change."""
    t = component_fix(("npx vitest run src/components", VITEST_COMPONENTS_FAIL), ("npm test", NPM_TEST_PASSES))
    (fix,) = fixes(t)
    assert "<ShiftCard> > shows the spots left" in fix.content and "vitest.config.ts" in fix.content
    assert "`npm test` passed" in fix.content


def test_the_tool_a_failing_script_ran_passing_on_its_own_verifies_the_fix() -> None:
    (fix,) = fixes(component_fix(("npm test", NPM_TEST_FAILS), ("npx vitest run src/components", VITEST_PASSES)))
    assert "<ShiftCard> > shows the spots left" in fix.content and "vitest.config.ts" in fix.content


def test_a_script_that_echoes_another_tool_still_passes_by_running_it_otherwise() -> None:
    jest_passes = NPM_TEST_PASSES.replace("> vitest run", "> jest")
    t = component_fix(("npx vitest run src/components", VITEST_COMPONENTS_FAIL), ("npm test", jest_passes))
    assert fixes(t) == []


BAZEL_FAILS = (
    "INFO: Analyzed 23 targets (2 packages loaded, 31 targets configured).\n"
    "ERROR: /home/oona/depot/svc/statement/BUILD.bazel:3:11: GoCompilePkg svc/statement/statement.a failed: (Exit 1): "
    "builder failed: error executing GoCompilePkg command (from go_library rule target //svc/statement:statement)\n\n"
    "Use --sandbox_debug to see verbose messages from the sandbox and retain the sandbox build root for debugging\n"
    "compilepkg: missing strict dependencies:\n"
    '\t/sandbox/execroot/_main/svc/statement/statement.go: import of "github.com/google/uuid"\n'
    "Target //svc/cmd:rentcalc failed to build\n"
    "Use --verbose_failures to see the command lines of failed build steps.\n"
    "ERROR: Build did NOT complete successfully\n"
)


BAZEL_NO_REPO = (
    "ERROR: /home/oona/depot/svc/statement/BUILD.bazel:3:11: no such package '@@[unknown repo "
    "'com_github_google_uuid' requested from @@]//': No repository visible as '@com_github_google_uuid' from main "
    "repository\nERROR: Analysis of target '//svc/statement:statement' failed; build aborted: Analysis failed\n"
    "ERROR: Build did NOT complete successfully\n"
)
USE_REPO = 'use_repo(go_deps, "com_github_google_uuid", "com_github_stretchr_testify")'


def test_a_bazel_build_error_is_the_tools_words_not_the_actions_banner() -> None:
    t = (
        Transcript("s1", cwd="/home/oona/depot")
        .prompt("give every statement a uuid v7")
        .edit("/home/oona/depot/svc/statement/statement.go", "ID string", "ID uuid.UUID")
        .bash("bazel build //svc/...", BAZEL_FAILS, code=1)
        .bash("bazel run //:gazelle", "INFO: Build completed successfully, 1 total action")
        .bash("bazel build //svc/...", BAZEL_NO_REPO, code=1)
        .edit("/home/oona/depot/MODULE.bazel", 'use_repo(go_deps, "com_github_stretchr_testify")', USE_REPO)
        .bash("bazel build //svc/...", "INFO: Build completed successfully, 14 total actions")
        .say("Gazelle added the uuid dependency to the BUILD file and MODULE.bazel imports its repo; the build passes.")
    )
    deps, repo = sorted(fixes(t), key=lambda i: "No repository visible" in i.title)
    assert "missing strict dependencies" in deps.title and "`bazel run //:gazelle`" in deps.content
    assert "GoCompilePkg" not in deps.title and "verbose_failures" not in deps.content
    assert "MODULE.bazel" in repo.content and "Build did NOT complete" not in repo.content


TS2345_FAILS = (
    "\n> shifts@0.3.0 typecheck\n> tsc --noEmit\n\n"
    "src/server/shift-repo.ts(19,59): error TS2345: Argument of type '\"signups.cancelled_at\"' is not assignable "
    "to parameter of type 'ReferenceExpression<DB, \"signups\">'.\n\nFound 1 error in src/server/shift-repo.ts:19\n"
)


def test_an_error_fixed_by_running_the_projects_code_generator_names_it() -> None:
    """The typed schema was stale: ``npm run db:codegen`` rewrote it, nothing was edited by hand."""
    t = (
        Transcript("s1", cwd="/home/dev/shifts")
        .prompt("add signups.cancelled_at and leave cancelled signups out of the counts")
        .edit("/home/dev/shifts/src/server/shift-repo.ts", ".where(", '.where("signups.cancelled_at", "is", null)')
        .bash("npm run typecheck", TS2345_FAILS, code=2)
        .bash("npm run db:codegen", "> kysely-codegen --dialect postgres --out-file src/server/db-types.ts\n✓ Done.")
        .bash("npm run typecheck", "\n> shifts@0.3.0 typecheck\n> tsc --noEmit\n\n")
        .say("Regenerated the Kysely types; typecheck passes.")
    )
    (fix,) = fixes(t)
    assert "TS2345" in fix.title and "`npm run db:codegen`" in fix.content


CHECK_SCRIPT_PASSES = (
    "\n> shop@0.7.0 check\n> npm run typecheck && npm run test\n\n\n> shop@0.7.0 typecheck\n> tsc\n\n\n"
    "> shop@0.7.0 test\n> vitest run\n\n ✓ app/lib/cart.server.test.ts (6 tests) 52ms\n\n Tests  6 passed (6)\n"
)
TS2353_FAILS = (
    "\n> shop@0.7.0 typecheck\n> tsc\n\napp/routes/teas.$slug.tsx:14:13 - error TS2353: Object literal may only "
    "specify known properties, and 'variants' does not exist in type '{}'.\n\n"
    "Found 1 error in app/routes/teas.$slug.tsx:14\n"
)


def test_a_whole_check_script_that_runs_the_failing_script_verifies_its_fix() -> None:
    """``npm run check`` echoes ``npm run typecheck && npm run test``: its pass is a pass of the type check."""
    t = (
        Transcript("s1", cwd="/home/dev/shop")
        .prompt("teas need sizes; show them on the tea page")
        .bash("npm run typecheck", TS2353_FAILS, code=2)
        .edit("/home/dev/shop/app/db/schema.ts", "export const teas", "export const teasRelations = relations(teas")
        .bash("npm run check", CHECK_SCRIPT_PASSES)
        .say("Declared the relation; npm run check passes.")
    )
    (fix,) = fixes(t)
    assert "TS2353" in fix.title and "schema.ts" in fix.content and "`npm run check` passed" in fix.content
