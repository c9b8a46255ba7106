"""What a failing check says, in a few words (pure); what an edit changed is :mod:`ctxbus.capture.edits`.

An error's **signature** is what identifies it across runs: the error codes (``TS2345``, ``E0502``, ``F401``), the
exception names (``KeyError``, ``TokenExpired``), the failing tests (``test_reset_expiry``, ``TestBackoff``) the
output names, and its **headline**, the first line that states the error. Two failures are the same error when
their identifiers overlap (or, with none, their headlines match): the same error hit five times is one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxbus.capture.edits import basename

_NUMBERS = re.compile(r"\d+")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: compiler and linter codes: TypeScript TS2345, rustc E0502, flake8/ruff F401 E501, pylint W0612, C# CS0103,
#: mypy's [arg-type] is read apart
_CODE = re.compile(r"\b(TS\d{4}|CS\d{4}|E\d{4}|[EFWCBNDSUIR]\d{3,4}|SA\d{4}|PLR\d{4}|RUF\d{3}|SIM\d{3}|ANN\d{3})\b")
_MYPY_CODE = re.compile(r"\[([a-z]+(?:-[a-z]+)+|[a-z]+-?[a-z]*)\]\s*$", re.M)
_LINT_RULE = re.compile(r"\s(@?[a-z][\w-]*/[\w-]+|no-[a-z-]+|prefer-[a-z-]+|eqeqeq|camelcase)\s*$", re.M)
_EXCEPTION = re.compile(
    r"\b((?:[a-z_][\w]*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Exceeded|Expired|Failure|Timeout|Invalid|NotFound|Denied|Refused|Mismatch|Panic|"
    r"Violation|Conflict|Missing|Unauthorized|Forbidden|Unavailable|Overflow|Underflow|Fault))\b"
)
#: a CamelCase name raised: ``E   app.errors.TokenExpired: ...`` or pytest's ``reset.py:42: TokenReused``
_RAISED = re.compile(
    r"^\s*(?:E\s+|.*\.\w+:\d+: |\*\* \()?(?:[a-z_]\w*\.|[A-Z]\w*::|[A-Z]\w*\.)*([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)"
    r"(?::\s|:?$|\))",
    re.M,
)
#: lint and compiler rule ids: rubocop's Style/StringLiterals, clang-tidy's [bugprone-use-after-move], gcc's
#: [-Werror=unused-variable], detekt's [MagicNumber], ktlint's (standard:indent)
_RULE_IDS = re.compile(
    r"(?:\b([A-Z][a-z]+/[A-Z]\w+):|\[-W(?:error=)?([\w-]+)\]|\[([a-z]+-[\w.-]+)\]\s*$|\[([A-Z][a-zA-Z]+)\]\s*$|"
    r"\(([a-z]+:[\w-]+)\)\s*$)",
    re.M,
)
#: rule ids in the shapes many linters share: a bracketed dotted or snake_case id (scalafix's ``[DisableSyntax.var]``,
#: lintr's ``[object_name_linter]``), a rule with its variant (ansible-lint's ``fqcn[action-core]``), an id after the
#: last bullet of a finding (the Dart analyzer's ``• unused_import``), ids after a finding's file (pint's
#: ``⨯ app/Foo.php   no_unused_imports``)
#: jest's suite that did not run, and the line that says why (``● Test suite failed to run`` then the error)
_SUITE_DID_NOT_RUN = re.compile(r"^\s*●\s+Test suite failed to run\s*\n(?:[ \t]*\n)*[ \t]*(\S[^\n]{3,300})$", re.M)
#: a diagnostic named on a line of its own (steep's ``│ Diagnostic ID: Ruby::UndeclaredMethodDefinition``)
_DIAGNOSTIC_ID = re.compile(r"^\W*(?:Diagnostic ID|Rule ID|Error code):\s+([A-Za-z][\w:./-]{2,80})\s*$", re.M)
_MORE_RULE_IDS = re.compile(
    r"\[([A-Z][A-Za-z]+[./][A-Z]?[A-Za-z]\w*)\]|\[([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\]\s*$|"
    r"(?<![\w\[@.$-])([a-z][a-z0-9-]*\[[a-z][\w-]*\])(?=:)|"
    r"(?<![\w.])([A-Z][a-z]+[A-Z]?\w*\.[A-Z]\w+):\s|"
    r"•\s*([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\s*$|"
    r"\.[A-Za-z]{1,5}\s{2,}([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:,\s*[a-z_]+)*\s*$",
    re.M,
)
#: failures that name what failed: dbt's ``Failure in test unique_orders_id`` / ``Compilation Error in model x``,
#: Kotlin's ``Unresolved reference: foo``, the linker's ``undefined reference to `foo'``
_WHAT_FAILED = re.compile(
    r"(?:Failure in test (\w+)|((?:Database|Compilation|Runtime|Dependency) Error) in (?:model|test|snapshot|seed|"
    r"macro|source) (\w+)|(Unresolved reference: \w+)|(Type mismatch)|(undefined reference to `[^']{1,80}')|"
    r"(Conflicting migrations)|(No such file or directory)|(Permission denied))"
)
#: named failures with no exception class: the Go race detector, policy checks (checkov CKV_AWS_111), lint rule ids
#: in links (clippy's ``index.html#ptr_arg``) and rule names (``clippy::ptr_arg``), Terraform's ``Error: <summary>``
_NAMED = re.compile(
    r"(DATA RACE|\bdeadlock\b|Segmentation fault|\bCKV2?_[A-Z0-9]+_\d+|\bAVD-[A-Z]+-\d{4}|\bSC\d{4}\b|\bDL\d{4}\b|"
    r"(?<=clippy::)[\w-]+|(?<=index\.html#)\w+)"
)
#: codes of other tools, read only from the lines that state an error: .NET analyzers (IDE0005, CA2000, SA1200),
#: SpotBugs patterns (EI_EXPOSE_REP), PostgreSQL's SQLSTATE (42P01: ...), PHPStan's identifiers (method.nonObject)
_MORE_CODES = re.compile(
    r"\b([A-Z]{2,3}\d{4})\b|\b([A-Z]{2,}(?:_[A-Z0-9]{2,}){1,4})\b|\b(\d{2}[A-Z]\d{2}):|🪪\s*([a-z]+(?:\.[A-Za-z]+)+)"
)
_STATES_ERROR = re.compile(r"(?i:\berror\b|\bfail|\bwarning\b)|\w(?:Exception|Error)\b")
_TF_ERROR = re.compile(r"^(?:\W\s*)?Error: ([A-Z][\w ,'-]{3,80})$", re.M)
#: a compiler's ``file:line[:col]: message`` (go, gcc, tsc's file(l,c): ...; buf's ``file:16:3:Enum zero value ...``)
_LOCATED = re.compile(r"^[\w./@-]+\.\w+(?::\d+){1,2}:(?: |(?=[A-Za-z]))(?!note:|warning:)(.{4,160})$", re.M)
#: golangci-lint names the linter at the end of a finding: ``file.go:57:9: Error return value ... (errcheck)``
_LINTER = re.compile(r"^[\w./@-]+\.\w+:\d+(?::\d+)?:(?: |(?=[A-Za-z])).+\((\w+)\)\s*$", re.M)
_UNDEFINED = re.compile(r"\bundefined: ([\w.]+)")
_GO_PANIC = re.compile(r"\bpanic: (.{3,80})")
_FAILED_TESTS = (
    re.compile(r"^FAILED ([\w./\\-]+::[\w:.\[\]-]+)", re.M),  # pytest summary
    re.compile(r"^_{3,} ((?:\w+\.)?test\w*(?:\[[^\]]*\])?) _{3,}$", re.M),  # pytest section header
    re.compile(r"^\s*--- FAIL: (\w+)", re.M),  # go test
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
    re.compile(r"^\s*rails test ([\w/.-]+:\d+)", re.M),  # minitest rerun line
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
#: a test named on the line just before its failure marker (GUT's ``- test_x`` then ``[Failed]: ...``)
_NAMED_BEFORE = re.compile(
    r"^[^\n]*?\b(test_\w+|\w+_test)\b[^\n]*\n[^\n]*(?i:\[fail(?:ed)?\]|\bfail(?:ed|ure)?:)", re.M
)
_HEADLINE = re.compile(
    r"^(?:E\s{2,}.+|.*\b(?:error|Error|ERROR)\b[:\[\] ].+|.*\b\w+(?:Error|Exception)\b:.+|panic: .+|"
    r"\s*(?:AssertionError|assert) .+|.*\bexpected\b.+|WARNING: .+|Check: .+|.*\bundefined: .+|e: .+|"
    r"\s*Failure/Error: .+|\s*thrown: .+|\s*\*\* \(.+|.*\b(?:Failure|Failed|FAILED) (?:in|at|:) .+|\[\s+FAILED\s+\].+|"
    r".*warning: .+\[[\w.-]+\]|\s*\d+ - [\w.-]+ \((?:Failed|SEGFAULT|Timeout)\))$",
    re.M,
)
#: a path with a source-like extension (the whole of it: ``app.html`` is no ``app.h``), optionally with :line; route
#: folders keep their brackets and a ``+`` (``routes/[id]/+page.svelte``, ``app/(shop)/page.tsx``)
_PATH = re.compile(
    r"(?<![\w/.+\]-])((?:~?/)?(?:[\w.@+\[\]-][\w.@+\[\]()-]*/(?:[\w.@+\[\]()-]+/)*)?[\w.@+\[\]-]+\.(?:py|pyi|ts|tsx|mts|js|jsx|mjs|cjs|go|rs|rb|java|kt|kts|cs|php|ex|exs|c|cc|cpp|h|hpp|ino|swift|scala|sc|sbt|vue|svelte|sql|toml|yaml|yml|json|gradle|erb|dart|hs|clj|cljs|cljc|edn|sol|[rR]|Rmd|ml|mli|zig|lua|m|mm|xml|tf|tpl|sh|proto|html|css|scss|cfg|ini|properties|fs|elm|jl|nim|cr|groovy|pm|pl|t|ps1|psm1|psd1|erl|hrl|bats|bash|gd|nims))(?![\w-])(?::\d+)?"
)
#: identifiers that name nothing in particular
_GENERIC = frozenset(
    {"Error", "Exception", "error", "AssertionError", "Failure", "RuntimeError", "SystemExit", "Failure/Error"}
    # jest's heading of a suite that did not run: the line after it says why
    | {"Test suite failed to run"}
    # log levels and verdict words that tools print in brackets (Maven's ``[INFO]``, ``[ERROR]``)
    | {"INFO", "ERROR", "WARN", "WARNING", "DEBUG", "TRACE", "FATAL", "FAILURE", "FAILED", "SUCCESS", "BUILD", "Info"}
    | {"PASSED", "PASS", "OK", "SKIPPED", "IGNORED"}
)
MAX_IDENTIFIERS = 6
ERROR_LINES = 3
HEADLINE_CHARS = 200
#: a long error line keeps its tail too (:func:`_clip`)
TAIL_CHARS = 80


@dataclass(frozen=True, slots=True)
class Signature:
    #: error codes, exception names and failing tests, most specific first (at most MAX_IDENTIFIERS)
    identifiers: tuple[str, ...]
    headline: str
    #: files the output points at (tracebacks, file:line), as written
    locations: tuple[str, ...] = ()
    #: the lines that state the error, in order (at most ERROR_LINES)
    lines: tuple[str, ...] = ()

    def then(self, later: Signature) -> Signature:
        """This error as a later run of the same failure showed it: what the later run says first (it is what the
        edits after it fixed), then what only this one said (a test that failed on a connection, then on a missing
        registration)."""
        if later == self:
            return self

        def both(first: tuple[str, ...], second: tuple[str, ...], most: int) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*first, *second)))[:most]

        return Signature(
            both(later.identifiers, self.identifiers, MAX_IDENTIFIERS),
            later.headline or self.headline,
            both(later.locations, self.locations, MAX_IDENTIFIERS),
            both(later.lines, self.lines, ERROR_LINES),
        )

    def same_error(self, other: Signature) -> bool:
        if self.identifiers and other.identifiers:
            return bool(set(self.identifiers) & set(other.identifiers))
        # the numbers in a message change between runs (``Timed out 5000ms`` then ``15000ms``, a time, a line)
        # and a long line's tail names this run's particulars (an address, a value): its head says which error
        head, other_head = self.headline[:HEADLINE_CHARS], other.headline[:HEADLINE_CHARS]
        return bool(head) and _NUMBERS.sub("N", head) == _NUMBERS.sub("N", other_head)

    @property
    def key(self) -> str:
        """What identifies the error in an item id: its first identifier, else its headline."""
        return self.identifiers[0] if self.identifiers else self.headline


#: BuildKit's step and time prefix (``#12 3.913 ``): the build step's own line follows it
_BUILDKIT = re.compile(r"^#\d+ (?:\d+\.\d+ )?", re.M)
#: a line that only announces an error (``error during build:``): the next line says which
_ANNOUNCES = re.compile(r"^\W*(?:\w+:? ){0,3}(?:error|Error|ERROR)(?: \w+){0,3}:$")


def clean(text: str) -> str:
    return _BUILDKIT.sub("", _ANSI.sub("", text))


def _said_next(text: str, start: int, line: str) -> str:
    """A line that only announces an error, with the line after it (``error during build: src/a.ts (1:10): ...``)."""
    if not _ANNOUNCES.match(line):
        return line
    rest = text[start:].split("\n", 2)
    following = rest[1].strip() if len(rest) > 1 else ""
    return f"{line} {' '.join(following.split())}" if following else line


def _add(found: list[str], value: str) -> None:
    value = value.strip().strip("'\"`:,")
    if value and value not in found and value not in _GENERIC and len(value) <= 160:
        found.append(value)


def signature_of(output: str, detail: str = "") -> Signature:
    """The signature of a failing check's output (``detail``: the outcome rules' summary line)."""
    text = clean(output)
    found: list[str] = []
    for match in _CODE.finditer(text):
        _add(found, match.group(1))
    for match in _MYPY_CODE.finditer(text):
        if "error" in text[max(0, match.start() - 300) : match.start()]:
            _add(found, f"[{match.group(1)}]")
    for match in _LINT_RULE.finditer(text):
        _add(found, match.group(1))
    for pattern in (*_FAILED_TESTS, _NAMED_BEFORE):
        for match in pattern.finditer(text):
            _add(found, match.group(1))
    for match in _EXCEPTION.finditer(text):
        _add(found, match.group(1).rsplit(".", 1)[-1])
    for match in _NAMED.finditer(text):
        clippy = text[max(0, match.start() - 8) : match.start()] == "clippy::"
        _add(found, match.group(1).replace("-", "_") if clippy else match.group(1))
    for line in text.splitlines():
        if "🪪" in line or _STATES_ERROR.search(line):
            for match in _MORE_CODES.finditer(line):
                _add(found, next(g for g in match.groups() if g))
    for match in _TF_ERROR.finditer(text):
        _add(found, match.group(1).strip())
    for match in _WHAT_FAILED.finditer(text):
        for group in match.groups():
            if group:
                _add(found, group)
    for match in _RULE_IDS.finditer(text):
        _add(found, next(g for g in match.groups() if g))
    for match in _DIAGNOSTIC_ID.finditer(text):
        _add(found, match.group(1))
    for match in _MORE_RULE_IDS.finditer(text):
        _add(found, next(g for g in match.groups() if g))
    for match in _LINTER.finditer(text):
        _add(found, match.group(1))
    for match in _UNDEFINED.finditer(text):
        _add(found, match.group(1))
    for match in _RAISED.finditer(text):
        _add(found, match.group(1))
    for match in _GO_PANIC.finditer(text):
        _add(found, match.group(1))
    at: dict[str, int] = {}
    for match in _SUITE_DID_NOT_RUN.finditer(text):
        at.setdefault(_clip(" ".join(match.group(1).split())), match.start(1))
    for pattern in (_HEADLINE, _LOCATED):
        for match in pattern.finditer(text):
            if _FRAME.search(match.group(0)) or _PASSED_LINE.search(match.group(0)) or _VERDICT.match(match.group(0)):
                continue  # a frame the error passed through (where, not what), a test that passed, a build's verdict
            line = _clip(_said_next(text, match.start(), " ".join(match.group(0).split())))
            if line and not line.lower().startswith(("error: exit code", "exit code")):
                at.setdefault(line, match.start())
    # a section banner (pytest's ``____ ERROR at setup of test_x ____``) names where; the lines after it say what
    own = [line for line in at if not _WRAPPER.match(line)]  # a wrapper's line only when nothing else says more
    ordered = sorted(own, key=lambda line: (bool(_BANNER.search(line)), at[line]))[:ERROR_LINES]
    ordered = (
        ordered
        or list(_plain_error_lines(text))
        or list(_file_findings(text))
        or sorted(at, key=lambda line: at[line])[:ERROR_LINES]
    )
    headline = ordered[0] if ordered else ""
    if not headline:
        headline = " ".join(detail.split())[:HEADLINE_CHARS]
    locations: list[str] = []
    for match in _PATH.finditer(text):
        path = match.group(1)
        if "site-packages" not in path and "node_modules" not in path and path not in locations:
            locations.append(path)
    return Signature(tuple(found[:MAX_IDENTIFIERS]), headline, tuple(locations[:MAX_IDENTIFIERS]), tuple(ordered))


#: a build tool's closing verdict (gradle's ``BUILD FAILED in 21s``, maven's ``BUILD FAILURE``): that, not what, failed
_VERDICT = re.compile(r"\s*(?:\[\w+\]\s*)?BUILD FAIL(?:ED|URE)\b")
#: a located line that reports a pass (Unity's ``test_x.c:14: test_dry [PASSED]``)
_PASSED_LINE = re.compile(r"[\[(:]\s*(?:PASSED|PASS|OK|ok|SKIPPED|IGNORED)\s*[\])]?\s*$")
#: what a wrapper prints when the tool it ran failed (make, dune, npm, yarn): the tool's own lines say what
_WRAPPER = re.compile(
    r"(?:g?make(?:\[\d+\])?: \*\*\*|Error: Command exited with code \d+|npm ERR!|error Command failed with exit code|"
    r"ERROR: (?:failed to solve: )?process \".*\" did not complete successfully|"
    r".*\bELIFECYCLE\b|Tests? Failed\. Exit: \d+)"
)
_BANNER = re.compile(r"_{4,}|={4,}|-{6,}")


def _clip(line: str) -> str:
    """A line of at most HEADLINE_CHARS, its head and its tail (a message's point is often at its end: ``Task ...
    got Future ... attached to a different loop``)."""
    if len(line) <= HEADLINE_CHARS + TAIL_CHARS:
        return line
    return f"{line[:HEADLINE_CHARS]} … {line[-TAIL_CHARS:]}"


#: a line of a stack trace (it names a file the error passed through, not one it is in)
_FRAME = re.compile(r"^\s*(?:at\s|#\d+\s|File \"|from\s|\d+:\s*0x|Error Trace:)|:\d+: in \w|\(package:")
#: a file:line (or file(line,col)) reference
_LOCATED_PATH = re.compile(_PATH.pattern.replace("(?::\\d+)?", "(?=:\\d+|\\(\\d+)"))


def unformatted(program: str, output: str) -> Signature:
    """The signature of a formatter's check that failed by naming files (``Diff in lua/a.lua``, ``would reformat
    b.gd``): the files it named, and a headline that says so."""
    text = clean(output)
    paths = list(dict.fromkeys(m.group(1) for m in _PATH.finditer(text)))[:MAX_IDENTIFIERS]
    lines = tuple(" ".join(line.split())[:HEADLINE_CHARS] for line in text.splitlines() if _PATH.search(line))
    named = ", ".join(basename(p) for p in paths[:3])
    headline = f"{program} found unformatted files" + (f": {named}" if named else "")
    return Signature((), headline, tuple(paths), lines[:ERROR_LINES])


def findings_by_file(output: str) -> dict[str, list[str]]:
    """The finding lines of a check's output grouped by the file each names with a line number
    (``src/a.ts(31,4): error TS2304 ...``, ``warning • ... • lib/b.dart:1:8 • unused_import``). A stack frame is no
    finding, except that the first frame after an error that named no file says where it is (Deno's and Node's
    ``error: TS2345 ...`` then ``at file:///app/cli.ts:31:30``). A path as written; the lines in order, each once."""
    found: dict[str, list[str]] = {}

    def add(path: str, line: str) -> None:
        lines = found.setdefault(path, [])
        if line not in lines:
            lines.append(line)

    pending = ""
    for raw in clean(output).replace("file://", "").splitlines():
        if len(raw) > 1_000:
            continue
        line = " ".join(raw.split())[:HEADLINE_CHARS]
        match = next(
            (m for m in _LOCATED_PATH.finditer(raw) if "site-packages" not in m[1] and "node_modules" not in m[1]),
            None,
        )
        if _FRAME.search(raw):
            if pending and match is not None:
                add(match.group(1), pending)
            pending = ""
        elif match is not None:
            add(match.group(1), line)
            pending = ""
        elif not pending and _STATES_ERROR.search(raw):
            pending = line
    return found


#: words that state a failure in any tool's own words (for output no pattern above knows)
_FAILURE_WORDS = re.compile(
    r"\b(?:errors?|fail(?:ed|s|ure)?|fatal|cannot|can't|could not|couldn't|unable|undefined|unused|not found|"
    r"no such|invalid|denied|mismatch|unexpected|missing|warning|violations?|refused|rejected|aborted|panic|"
    r"(?:issues?|problems?) found)\b",
    re.I,
)
#: a count of nothing (``failed=0``, ``0 errors``): no failure stated
_ZERO = re.compile(
    r"(?i)\b(?:failed|errors?|failures?|unreachable|warnings?)\s*[=:]\s*0\b|\b0 (?:failed|errors?|failures?)\b"
)
#: summary lines that count failures rather than state one
_TALLY = re.compile(r"^\W*(?:\d+ (?:errors?|failures?|warnings?|failed)\b|exit code \d+|error: exit code)", re.I)


def _plain_error_lines(text: str) -> tuple[str, ...]:
    """The first lines that state a failure in the tool's own words, when no known shape matched."""
    found: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())[:HEADLINE_CHARS]
        if len(line) < 8 or line in found or _TALLY.match(line) or _WRAPPER.match(line):
            continue
        if not _FAILURE_WORDS.search(_ZERO.sub("", line)):
            continue
        found.append(line)
        if len(found) == ERROR_LINES:
            break
    return tuple(found)


#: a line that starts with the file it is about and says something of it (``lib/A.pm: Loop iterator is not lexical at
#: line 11``); one that reports the file clean (``lib/B.pm source OK``) says nothing
_FILE_FINDING = re.compile(_PATH.pattern + r":?\s+\S.{3,}")
_CLEAN_FILE = re.compile(r"(?i)\b(?:source )?(?:ok|passed|clean|unchanged)\W*$")


def _file_findings(text: str) -> tuple[str, ...]:
    """The first lines that name a file and say what is wrong with it, for a tool whose findings use no word of
    failure and whose only other line is its wrapper's (perlcritic through ``make``)."""
    found: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if len(line) > 1_000 or not _FILE_FINDING.match(line) or _CLEAN_FILE.search(line) or _FRAME.search(line):
            continue
        clipped = _clip(line)
        if clipped not in found:
            found.append(clipped)
        if len(found) == ERROR_LINES:
            break
    return tuple(found)
