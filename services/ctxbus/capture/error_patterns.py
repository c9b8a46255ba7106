"""How tools say what failed, as patterns (pure data for :mod:`ctxbus.capture.signature`): error codes, exception
names, failing tests' markers, lint rules, the lines that state an error, source paths, and the words that name
nothing in particular.
"""

from __future__ import annotations

import re

NUMBERS = re.compile(r"\d+")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: compiler and linter codes: TypeScript TS2345, rustc E0502, flake8/ruff F401 E501, pylint W0612, C# CS0103,
#: mypy's [arg-type] is read apart
CODE = re.compile(r"\b(TS\d{4}|CS\d{4}|E\d{4}|[EFWCBNDSUIR]\d{3,4}|SA\d{4}|PLR\d{4}|RUF\d{3}|SIM\d{3}|ANN\d{3})\b")
MYPY_CODE = re.compile(r"\[([a-z]+(?:-[a-z]+)+|[a-z]+-?[a-z]*)\]\s*$", re.M)
#: a plugin's rule (``react/jsx-key``, ``@typescript-eslint/no-floating-promises``): two letters or more each side
#: of the slash, so a log line ending ``via n/a`` names none
LINT_RULE = re.compile(r"\s(@?[a-z][\w-]+/[\w-]{2,}|no-[a-z-]+|prefer-[a-z-]+|eqeqeq|camelcase)\s*$", re.M)
EXCEPTION = re.compile(
    r"\b((?:[a-z_][\w]*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Exceeded|Expired|Failure|Timeout|Invalid|NotFound|Denied|Refused|Mismatch|Panic|"
    r"Violation|Conflict|Missing|Unauthorized|Forbidden|Unavailable|Overflow|Underflow|Fault))\b"
)
#: the exception a Python traceback ends on (its first line at the margin after the indented frames): the error,
#: whatever its name ends with (``twisted.internet.error.ReactorNotRestartable``, ``app.errors.TokenReused: ...``)
TRACEBACK_RAISED = re.compile(
    r"^Traceback \(most recent call last\):\n(?:[ \t][^\n]*\n)+(?:[a-z_]\w*\.)*([A-Z]\w+)(?::|$)", re.M
)
#: a CamelCase name raised: ``E   app.errors.TokenExpired: ...`` or pytest's ``reset.py:42: TokenReused``
RAISED = re.compile(
    r"^\s*(?:E\s+|.*\.\w+:\d+: |\*\* \()?(?:[a-z_]\w*\.|[A-Z]\w*::|[A-Z]\w*\.)*([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)"
    r"(?::\s|:?$|\))",
    re.M,
)
#: lint and compiler rule ids: rubocop's Style/StringLiterals, clang-tidy's [bugprone-use-after-move], gcc's
#: [-Werror=unused-variable], detekt's [MagicNumber], ktlint's (standard:indent)
RULE_IDS = re.compile(
    r"(?:\b([A-Z][a-z]+/[A-Z]\w+):|\[-W(?:error=)?([\w-]+)\]|\[([a-z]+-[\w.-]+)\]\s*$|\[([A-Z][a-zA-Z]+)\]\s*$|"
    r"\(([a-z]+:[\w-]+)\)\s*$)",
    re.M,
)
#: jest's suite that did not run, and the line that says why (``● Test suite failed to run`` then the error)
SUITE_DID_NOT_RUN = re.compile(r"^\s*●\s+Test suite failed to run\s*\n(?:[ \t]*\n)*[ \t]*(\S[^\n]{3,300})$", re.M)
#: a Brakeman warning: its category names it, its message states it (``Category: SQL Injection`` ... ``Message:
#: Possible SQL injection``)
BRAKEMAN_WARNING = re.compile(r"^Category: ([A-Z][^\n]{2,60})\nCheck: \w+\nMessage: ([^\n]{3,200})$", re.M)
#: web-ext lint's (addons-linter's) first error, the row under its table's header (``EXTENSION_ID_REQUIRED   The
#: extension ID is``; the message wraps in its column)
WEB_EXT_ERROR = re.compile(
    r"^ERRORS:\n[ \t]*\nCode[ \t]+Message[^\n]*\n"
    r"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)[ \t]{2,}(\S[^\n]{0,60}?)(?:[ \t]{2,}|$)",
    re.M,
)
#: minitest's message, on the line under its failed test (``BookingTest#test_x [test/models/booking_test.rb:33]:``)
MINITEST_MESSAGE = re.compile(r"^[\w:]+#[\w-]+ \[[^\]\n]{1,200}\]:\n[ \t]*(\S[^\n]{3,300})$", re.M)
#: a diagnostic named on a line of its own (steep's ``│ Diagnostic ID: Ruby::UndeclaredMethodDefinition``)
DIAGNOSTIC_ID = re.compile(r"^\W*(?:Diagnostic ID|Rule ID|Error code):\s+([A-Za-z][\w:./-]{2,80})\s*$", re.M)
#: rule ids in the shapes many linters share: a bracketed dotted or snake_case id (scalafix's ``[DisableSyntax.var]``,
#: lintr's ``[object_name_linter]``), a rule with its variant (ansible-lint's ``fqcn[action-core]``), an id after the
#: last bullet of a finding (the Dart analyzer's ``• unused_import``), ids after a finding's file (pint's
#: ``⨯ app/Foo.php   no_unused_imports``)
MORE_RULE_IDS = re.compile(
    r"\[([A-Z][A-Za-z]+[./][A-Z]?[A-Za-z]\w*)\]|\[([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\]\s*$|"
    r"(?<![\w\[@.$-])([a-z][a-z0-9-]*\[[a-z][\w-]*\])(?=:)|"
    r"(?<![\w.])([A-Z][a-z]+[A-Z]?\w*\.[A-Z]\w+):\s|"
    r"•\s*([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\s*$|"
    r"\.[A-Za-z]{1,5}\s{2,}([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:,\s*[a-z_]+)*\s*$",
    re.M,
)
#: failures that name what failed: dbt's ``Failure in test unique_orders_id`` / ``Compilation Error in model x``,
#: Kotlin's ``Unresolved reference: foo``, the linker's ``undefined reference to `foo'``
WHAT_FAILED = re.compile(
    r"(?:Failure in test (\w+)|((?:Database|Compilation|Runtime|Dependency) Error) in (?:model|test|snapshot|seed|"
    r"macro|source) (\w+)|(Unresolved reference: \w+)|(Type mismatch)|(undefined reference to `[^']{1,80}')|"
    r"(Conflicting migrations)|(No such file or directory)|(Permission denied))"
)
#: named failures with no exception class: the Go race detector, policy checks (checkov CKV_AWS_111), lint rule ids
#: in links (clippy's ``index.html#ptr_arg``) and rule names (``clippy::ptr_arg``), Terraform's ``Error: <summary>``
NAMED = re.compile(
    r"(DATA RACE|\bdeadlock\b|Segmentation fault|\bCKV2?_[A-Z0-9]+_\d+|\bAVD-[A-Z]+-\d{4}|\bSC\d{4}\b|\bDL\d{4}\b|"
    r"(?<=clippy::)[\w-]+|(?<=index\.html#)\w+)"
)
#: codes of other tools, read only from the lines that state an error: .NET analyzers (IDE0005, CA2000, SA1200),
#: SpotBugs patterns (EI_EXPOSE_REP), PostgreSQL's SQLSTATE (42P01: ...), PHPStan's identifiers (method.nonObject)
MORE_CODES = re.compile(
    r"\b([A-Z]{2,3}\d{4})\b|\b([A-Z]{2,}(?:_[A-Z0-9]{2,}){1,4})\b|\b(\d{2}[A-Z]\d{2}):|🪪\s*([a-z]+(?:\.[A-Za-z]+)+)"
)
STATES_ERROR = re.compile(r"(?i:\berror\b|\bfail|\bwarning\b)|\w(?:Exception|Error)\b")
TF_ERROR = re.compile(r"^(?:\W\s*)?Error: ([A-Z][\w ,'-]{3,80})$", re.M)
#: a compiler's ``file:line[:col]: message`` (go, gcc, tsc's file(l,c): ...; buf's ``file:16:3:Enum zero value ...``)
LOCATED = re.compile(r"^[\w./@-]+\.\w+(?::\d+){1,2}:(?: |(?=[A-Za-z]))(?!note:|warning:)(.{4,160})$", re.M)
#: golangci-lint names the linter at the end of a finding: ``file.go:57:9: Error return value ... (errcheck)``
LINTER = re.compile(r"^[\w./@-]+\.\w+:\d+(?::\d+)?:(?: |(?=[A-Za-z])).+\((\w+)\)\s*$", re.M)
#: a finding javac prints through maven with its lint category or Error Prone check in brackets:
#: ``[WARNING] /src/…/ClaimNotifier.java:[31,9] [MissingCasesInEnumSwitch] Non-exhaustive switch``
JAVAC_CATEGORY = re.compile(r"\.java:\[\d+,\d+\] \[([A-Za-z][\w-]{1,60})\] ")
#: a PHP_CodeSniffer sniff code closing a finding (``phpcs -s``): ``(WordPress.DB.PreparedSQL.InterpolatedNotPrepared)``
PHPCS_SNIFF = re.compile(r"\(([A-Z][A-Za-z0-9]+(?:\.[A-Z][A-Za-z0-9]+){3})\)\s*$", re.M)
#: the build says its warnings are errors: a located warning is then what failed (signature._located_warnings)
WERROR = re.compile(r"-Werror\b|warnings being treated as errors")
#: a finding's rule as the fragment of its docs link (revive's ``⚠  https://revive.run/r#exported  exported type …``),
#: on a line marked as a finding
DOCS_LINK_RULE = re.compile(
    r"[\u26a0\u2716\u2717\u00d7][^\n]{0,120}?https?://[^\s#]{3,200}#([a-z][a-z0-9]*(?:[-_][a-z0-9]+)*)(?=\s|$)"
)
UNDEFINED = re.compile(r"\bundefined: ([\w.]+)")
GO_PANIC = re.compile(r"\bpanic: (.{3,80})")
FAILED_TESTS = (
    # ScalaTest's failed test (``[info] - should list a tenant's repairs *** FAILED ***``)
    re.compile(r"^(?:\[info\])?[ \t]*- ([^\n]{3,160}?) \*\*\* FAILED \*\*\*", re.M),
    # Expecto's failed test, by its path of test list names (``[14:05:16 ERR] bookings/back-to-back ... failed in 00:``)
    re.compile(r"^\[\d\d:\d\d:\d\d ERR\] ([^\n]{3,160}?) (?:failed|errored) in \d\d:\d\d:", re.M),
    # Playwright's failed test, by its title path after its place (``✘  1 e2e/a.spec.ts:8:3 › export › exports ...
    # (17.1s)``, ``1) [chromium] › e2e/a.spec.ts:8:3 › export › ... ───``)
    re.compile(
        r"^[ \t]*(?:✘|×|\d+\))[ \t]+(?:\d+[ \t]+)?(?:\[[\w .-]+\] › )?[\w./@-]+\.\w+:\d+:\d+ › ([^\n]+?)"
        r"(?:[ \t]+\(\d+(?:\.\d+)?m?s\))?(?:[ \t]+─+)?[ \t]*$",
        re.M,
    ),
    re.compile(r"^FAILED ([\w./\\-]+::[\w:.\[\]-]+)", re.M),  # pytest summary
    re.compile(r"^_{3,} ((?:\w+\.)?test\w*(?:\[[^\]]*\])?) _{3,}$", re.M),  # pytest section header
    re.compile(r"^\s*--- FAIL: (\w+(?:/\S+)?)", re.M),  # go test (a subtest by its path: ``TestSuite/TestCase``)
    re.compile(r"^\s*●\s+(.+?)\s*$", re.M),  # jest
    re.compile(r"^\s*(?:×|✕|✗)\s+(.+?)(?:\s+\d+\s*ms)?\s*$", re.M),  # vitest / jest list
    re.compile(r"^test ([\w:]+) \.\.\. FAILED", re.M),  # cargo test
    re.compile(r"^rspec \./[\w/.-]+:\d+ # (.+)$", re.M),  # rspec
    re.compile(r"^crystal spec [\w/.-]+:\d+ # (.+)$", re.M),  # crystal spec's rerun line
    re.compile(r"^#\s+Failed test '([^'\n]{3,100})'", re.M),  # Test::More (prove)
    re.compile(r"^\s*([\w.]+ > [\w ()\[\]'.-]+?) FAILED\s*$", re.M),  # gradle
    re.compile(r"^\s*(?:Failed|FAIL!?)\s+([\w.]+(?:Test|Tests|Spec)\w*)", re.M),  # dotnet, maven
    # Maven surefire 3: ``[ERROR] com.acme.FooTest.rejectsBlank -- Time elapsed: 0.06 s <<< FAILURE!`` (class.method)
    re.compile(r"^\[ERROR\] (?:[a-z_]\w*\.)*([A-Z]\w*\.\w+) -- Time elapsed: .*<<< (?:FAILURE|ERROR)!", re.M),
    re.compile(r"^\s*\d+\) ([\w\\]+::\w+)", re.M),  # phpunit
    re.compile(r"^\s*\d+\) (test .+?) \([\w.]+\)\s*$", re.M),  # ExUnit
    re.compile(r"^\[\s+FAILED\s+\] ([\w./]+)", re.M),  # GoogleTest
    re.compile(r"^\s*\d+ - ([\w.-]+) \((?:Failed|SEGFAULT|Timeout|Subprocess aborted|Child aborted)\)", re.M),  # ctest
    # minitest: ``1) Failure:`` (Rails: ``Failure:``), then ``Class#test_x [file:line]:`` (Rails names keep dashes);
    # its rerun line names the place only
    re.compile(r"^\s*(?:\d+\) )?(?:Failure|Error):\n\s*([\w:]+#[\w-]+)", re.M),
    re.compile(r"^\s*(?:bin/)?rails test ([\w/.-]+:\d+)", re.M),
    # node:test's spec reporter (not its ``✖ failing tests:`` heading, nor eslint's tally)
    re.compile(r"^\s*\u2716\s+(?!\d+ problems?\b|failing tests:)(.+?)(?:\s+\(\d+(?:\.\d+)?m?s\))?\s*$", re.M),
    # many runners' own marker, then the test's name: busted's ``Fail || name``, alcotest's ``[FAIL] suite 1 name``,
    # TAP's ``not ok 2 - name``
    re.compile(
        r"^\s*(?:\[\s*(?i:FAIL(?:ED)?)\s*\]|FAIL(?:ED)?\b|Fail(?:ed)?\b|not ok \d+)[ \t]*(?:\|\||[:-])?[ \t]+"
        # (not a tally or a heading: ``Failed tests:  5, 7``, ``Failed examples:``)
        r"(?!(?:tests?|examples?|specs?|subtests?)\s*:)"
        # (not go's package line, ``FAIL\tgithub.com/acme/svc/store\t0.388s``: a package, no test)
        r"(?=[A-Za-z_'\"`])(?![\w./-]+\s+\d+(?:\.\d+)?s\s*$)(?=[^\n]*[A-Za-z]{2})([^\n]{3,100}?)\s*$",
        re.M,
    ),
)
#: XCTest's failed test, class and method: ``error: -[AppTests.BookingTests testX] :`` (macOS), ``Test Case
#: 'BookingTests.testX' failed`` (Linux)
XCTEST_CASE = re.compile(r"(?:error: -\[|^Test Case '(?:-\[)?)(?:\w+\.)?(\w+)[ .](test\w+)(?:\] :|\]?' failed)", re.M)
#: a test named on the line just before its failure marker (GUT's ``- test_x`` then ``[Failed]: ...``)
NAMED_BEFORE = re.compile(r"^[^\n]*?\b(test_\w+|\w+_test)\b[^\n]*\n[^\n]*(?i:\[fail(?:ed)?\]|\bfail(?:ed|ure)?:)", re.M)
HEADLINE = re.compile(
    r"^(?:E\s{2,}.+|.*\b(?:error|Error|ERROR)\b[:\[\] ].+|.*\b\w+(?:Error|Exception)\b:.+|panic: .+|"
    r"\s*(?:AssertionError|assert) .+|.*\bexpected\b.+|WARNING: .+|Check: .+|.*\bundefined: .+|e: .+|"
    r"\s*Failure/Error: .+|\s*thrown: .+|\s*\*\* \(.+|.*\b(?:Failure|Failed|FAILED) (?:in|at|:) .+|\[\s+FAILED\s+\].+|"
    r".*warning: .+\[[\w.-]+\]|\s*\d+ - [\w.-]+ \((?:Failed|SEGFAULT|Timeout)\)|"
    # credo's finding: ``┃ [R] ↘ message`` (its category and priority; the place is on the next line)
    r"┃ \[[A-Z]\] \S \w.+|"
    # Flutter's announcement of what was thrown (the next line says what: ``signature._said_next``)
    r"The following .{3,80} was thrown\b.*:|"
    # a formatter's check naming what it would change (fantomas, prettier, dotnet format, ...)
    r".*\b(?:aren't|isn't|not) (?:properly )?formatted\b.*|"
    # a JavaScript runtime error's message, wherever a tool or a page printed it
    r".*\b(?:is not a function|is not a constructor|is not defined|"
    r"Cannot read propert(?:y|ies) of (?:undefined|null))\b.*|"
    # ScalaTest's message under a failed test, closed by its place (``[info]   404 was not equal to 200 (A.scala:58)``)
    r"\[info\] {3,}\S[^\n]{0,200}? \(\w+\.scala:\d+\))$",
    re.M,
)
#: a path with a source-like extension (the whole of it: ``app.html`` is no ``app.h``), optionally with :line; route
#: folders keep their brackets and a ``+`` (``routes/[id]/+page.svelte``, ``app/(shop)/page.tsx``)
PATH = re.compile(
    r"(?<![\w/.+\]-])((?:~?/)?(?:[\w.@+\[\]-][\w.@+\[\]()-]*/(?:[\w.@+\[\]()-]+/)*)?[\w.@+\[\]-]+\.(?:py|pyi|ts|tsx|mts|js|jsx|mjs|cjs|go|rs|rb|java|kt|kts|cs|php|ex|exs|c|cc|cpp|h|hpp|ino|swift|scala|sc|sbt|vue|svelte|sql|toml|yaml|yml|json|gradle|erb|dart|hs|clj|cljs|cljc|edn|sol|[rR]|Rmd|ml|mli|zig|lua|m|mm|xml|tf|tpl|sh|proto|html|css|scss|cfg|ini|properties|fs|elm|jl|nim|cr|groovy|pm|pl|t|ps1|psm1|psd1|erl|hrl|bats|bash|gd|nims))(?![\w-])(?::\d+)?"
)
#: identifiers that name nothing in particular
GENERIC = frozenset(
    {"Error", "Exception", "error", "AssertionError", "Failure", "RuntimeError", "SystemExit", "Failure/Error"}
    # jest's heading of a suite that did not run: the line after it says why
    | {"Test suite failed to run"}
    # verdict words that tools print in brackets (Maven's ``[FAILURE]``); log levels are ``LOG_LEVELS``
    | {"FAILURE", "FAILED", "BUILD"}
    | {"PASSED", "PASS", "OK", "SKIPPED", "IGNORED"}
)
#: log levels, in any case and with or without brackets (Maven's ``[INFO]``, sbt's ``[info]``, a logger's ``WARN``):
#: how loud a line is, never what failed
LOG_LEVELS = frozenset({"INFO", "ERROR", "WARN", "WARNING", "DEBUG", "TRACE", "FATAL", "SUCCESS", "NOTICE"})
#: exceptions a build tool or process runner raises when the tool it ran failed (Nuke, Gradle, Maven, Ant, execa,
#: Python's subprocess, Node's child_process): they say that, not what, failed, so they join no two errors
WRAPPER_EXCEPTIONS = frozenset(
    {
        "ProcessException",
        "TaskExecutionException",
        "GradleException",
        "MojoFailureException",
        "MojoExecutionException",
        "BuildException",
        "CalledProcessError",
        "ExecaError",
        "ExecException",
        "ChildProcessError",
        "CommandFailedException",
        "BuildFailedException",
        "TestsFailedException",
    }
)
#: what a wrapper prints when the tool it ran failed (make, dune, npm, yarn, just, go-task, composer, docker build):
#: the tool's own lines say what, and the steps it echoed end there
WRAPPER_FAILED = re.compile(
    r"\s*(?:g?make(?:\[\d+\])?: \*\*\*|Error: Command exited with code \d+|npm ERR!|npm error|"
    r"error Command failed with exit code|ERROR: (?:failed to solve: )?process \".*\" did not complete successfully|"
    r".*\bELIFECYCLE\b|Tests? Failed\. Exit: \d+|error: Recipe `|task: Failed to run task|"
    r"Script .* handling the .* event returned with error code|"
    # bazel: an action's banner (the tool's own words follow it), and its closing lines
    r"ERROR: \S+:\d+:\d+: [^\n]{0,200}? failed: \(Exit \d+\)|ERROR: Build did NOT complete successfully|"
    r"Target \S+ failed to build|ERROR: Analysis of target \S+ failed; build aborted|"
    r"Use --(?:verbose_failures|sandbox_debug) to see )"
)
