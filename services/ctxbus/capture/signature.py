"""What a failing check says, in a few words (pure); what an edit changed is :mod:`ctxbus.capture.edits`.

An error's **signature** is what identifies it across runs: the error codes (``TS2345``, ``E0502``, ``F401``), the
exception names (``KeyError``, ``TokenExpired``), the failing tests (``test_reset_expiry``, ``TestBackoff``) the
output names, and its **headline**, the first line that states the error. Two failures are the same error when
their identifiers overlap (or, with none, their headlines match): the same error hit five times is one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxbus.capture.edits import basename
from ctxbus.capture.error_patterns import (
    BRAKEMAN_WARNING,
    CODE,
    DIAGNOSTIC_ID,
    DOCS_LINK_RULE,
    EXCEPTION,
    FAILED_TESTS,
    GENERIC,
    GO_PANIC,
    HEADLINE,
    JAVAC_CATEGORY,
    LINT_RULE,
    LINTER,
    LOCATED,
    LOG_LEVELS,
    MINITEST_MESSAGE,
    MORE_CODES,
    MORE_RULE_IDS,
    MYPY_CODE,
    NAMED,
    NAMED_BEFORE,
    NUMBERS,
    PATH,
    PHPCS_SNIFF,
    RAISED,
    RULE_IDS,
    STATES_ERROR,
    SUITE_DID_NOT_RUN,
    TF_ERROR,
    TRACEBACK_RAISED,
    UNDEFINED,
    WEB_EXT_ERROR,
    WERROR,
    WHAT_FAILED,
    WRAPPER_EXCEPTIONS,
    WRAPPER_FAILED,
    XCTEST_CASE,
)
from ctxbus.capture.json_logs import LoggedError, logged_errors
from ctxbus.capture.output_lines import clean, runs_on, said_next

MAX_IDENTIFIERS = 6
#: what a failed tool result starts with (``Error: Exit code 1``): a process's status, never the error's name
_EXIT_CODE = re.compile(r"(?:Error: )?Exit code \d+")
ERROR_LINES = 3
HEADLINE_CHARS = 200
#: a long error line keeps its tail too (:func:`_clip`): lines up to 320 characters whole (Puppet says what is wrong
#: after some 180 characters of where)
TAIL_CHARS = 120


@dataclass(frozen=True, slots=True)
class Signature:
    #: error codes, exception names and failing tests, most specific first (at most MAX_IDENTIFIERS)
    identifiers: tuple[str, ...]
    headline: str
    #: files the output points at (tracebacks, file:line), as written
    locations: tuple[str, ...] = ()
    #: the lines that state the error, in order (at most ERROR_LINES)
    lines: tuple[str, ...] = ()

    def only(self, identifiers: Sequence[str]) -> Signature:
        """This error narrowed to some of its identifiers (and the lines that name them, if any do)."""
        lines = tuple(line for line in self.lines if any(i in line for i in identifiers)) or self.lines
        return Signature(tuple(identifiers), lines[0] if lines else self.headline, self.locations, lines)

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
            # a wrapper's exception (``ProcessException``) joins two errors only when neither names another
            own, others = set(self.identifiers) - WRAPPER_EXCEPTIONS, set(other.identifiers) - WRAPPER_EXCEPTIONS
            if own and others:
                return bool(own & others)
            return bool(set(self.identifiers) & set(other.identifiers))
        # the numbers in a message change between runs (``Timed out 5000ms`` then ``15000ms``, a time, a line)
        # and a long line's tail names this run's particulars (an address, a value): its head says which error
        head, other_head = self.headline[:HEADLINE_CHARS], other.headline[:HEADLINE_CHARS]
        return bool(head) and NUMBERS.sub("N", head) == NUMBERS.sub("N", other_head)

    @property
    def key(self) -> str:
        """What identifies the error in an item id: its first identifier, else its headline (a wrapper's own exception,
        ``BuildFailedException``, only when there is no headline either)."""
        own = [i for i in self.identifiers if i not in WRAPPER_EXCEPTIONS]
        if own:
            return own[0]
        return self.headline or (self.identifiers[0] if self.identifiers else "")


def _add(found: dict[str, None], value: str) -> None:
    """``value`` (trimmed) into the identifiers found so far, in order, once (a dict: a membership test per
    identifier, not a scan of those found)."""
    value = value.strip().strip("'\"`:,")
    if not value or len(value) > 160 or value in GENERIC or value.strip("[]").upper() in LOG_LEVELS:
        return  # nothing, a whole line, a generic name, or a log level (sbt's ``[info]``): none says what failed
    if not _EXIT_CODE.fullmatch(value):
        found.setdefault(value, None)


def _identifiers(text: str, logged: list[LoggedError]) -> list[str]:
    """Error codes, exception names, failing tests and rule ids, in the order of their patterns' specificity."""
    found: dict[str, None] = {}
    for pattern in (JAVAC_CATEGORY, PHPCS_SNIFF):
        for match in pattern.finditer(text):
            _add(found, match.group(1))
    for error in logged:
        for identifier in error.identifiers:
            _add(found, identifier)
    for match in CODE.finditer(text):
        _add(found, match.group(1))
    for match in MYPY_CODE.finditer(text):
        if "error" in text[max(0, match.start() - 300) : match.start()]:
            _add(found, f"[{match.group(1)}]")
    for pattern in (LINT_RULE, *FAILED_TESTS, NAMED_BEFORE):
        for match in pattern.finditer(text):
            _add(found, match.group(1))
    for match in XCTEST_CASE.finditer(text):
        _add(found, f"{match.group(1)}.{match.group(2)}")
    for match in TRACEBACK_RAISED.finditer(text):
        _add(found, match.group(1))
    for match in EXCEPTION.finditer(text):
        _add(found, match.group(1).rsplit(".", 1)[-1])
    for match in NAMED.finditer(text):
        clippy = text[max(0, match.start() - 8) : match.start()] == "clippy::"
        _add(found, match.group(1).replace("-", "_") if clippy else match.group(1))
    for line in text.splitlines():
        if "🪪" in line or STATES_ERROR.search(line):
            for match in MORE_CODES.finditer(line):
                _add(found, next(g for g in match.groups() if g))
    for match in TF_ERROR.finditer(text):
        _add(found, match.group(1).strip())
    for match in WHAT_FAILED.finditer(text):
        for group in match.groups():
            if group:
                _add(found, group)
    for match in RULE_IDS.finditer(text):
        _add(found, next(g for g in match.groups() if g))
    for pattern in (DIAGNOSTIC_ID, DOCS_LINK_RULE, BRAKEMAN_WARNING, WEB_EXT_ERROR):
        for match in pattern.finditer(text):
            _add(found, match.group(1))
    for match in MORE_RULE_IDS.finditer(text):
        _add(found, next(g for g in match.groups() if g))
    for pattern in (LINTER, UNDEFINED, RAISED, GO_PANIC):
        for match in pattern.finditer(text):
            _add(found, match.group(1))
    # pytest's summary line names a failed test with its message (``tests/a.py::test_x - assert False``): the same test
    found = {i: None for i in found if (test := i.partition(" - ")[0]) == i or test not in found}
    # a wrapper's own exception (FAKE's ``BuildFailedException``) says less than what the tool it ran said
    found = {i: None for i in sorted(found, key=lambda i: i in WRAPPER_EXCEPTIONS)}
    # a failed subtest names its parent too (go's ``TestSuite`` and ``TestSuite/TestCase``): the path says which
    parents = {i[:at] for i in found for at in range(len(i)) if i[at] == "/"}
    return [i for i in found if i not in parents]


def signature_of(output: str, detail: str = "") -> Signature:
    """The signature of a failing check's output (``detail``: the outcome rules' summary line)."""
    text = clean(output)
    logged = list(logged_errors(text))
    found = _identifiers(text, logged)
    at: dict[str, int] = {}
    log_lines = {error.start for error in logged}
    for error in logged:
        at.setdefault(_clip(error.statement), error.start)
    if WERROR.search(text):  # the warnings are what failed
        for line, start in _located_warnings(text):
            at.setdefault(_clip(line), start)
    for match in (*SUITE_DID_NOT_RUN.finditer(text), *MINITEST_MESSAGE.finditer(text)):
        at.setdefault(_clip(" ".join(match.group(1).split())), match.start(1))
    for match in (*BRAKEMAN_WARNING.finditer(text), *WEB_EXT_ERROR.finditer(text)):
        at.setdefault(_clip(f"{match.group(1)}: {match.group(2)}"), match.start())
    for pattern in (HEADLINE, LOCATED):
        for match in pattern.finditer(text):
            if _FRAME.search(match.group(0)) or _PASSED_LINE.search(match.group(0)) or _VERDICT.match(match.group(0)):
                continue  # a frame the error passed through (where, not what), a test that passed, a build's verdict
            if text.rfind("\n", 0, match.start()) + 1 in log_lines:
                continue  # a JSON log line: read above as what it says
            line = said_next(text, match.start(), " ".join(match.group(0).split()))
            line = _clip(runs_on(text, match.start(), line))
            if line and not line.lower().startswith(("error: exit code", "exit code")):
                at.setdefault(line, match.start())
    # a section banner (pytest's ``____ ERROR at setup of test_x ____``) names where; the lines after it say what
    # a wrapper's line (``make: ***``, ``-> BuildFailedException: ...``) only when nothing else says more
    own = [line for line in at if not WRAPPER_FAILED.match(line) and not _wrapper_exception_line(line)]
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
    for match in PATH.finditer(text):
        path = match.group(1)
        if "site-packages" not in path and "node_modules" not in path and path not in locations:
            locations.append(path)
    return Signature(tuple(found[:MAX_IDENTIFIERS]), headline, tuple(locations[:MAX_IDENTIFIERS]), tuple(ordered))


def _located_warnings(text: str) -> list[tuple[str, int]]:
    """Warning lines that name a file and line (``[WARNING] /src/A.java:[31,9] …``, ``a.c:3:5: warning: …``),
    with where each starts; a line is read once, and a longer one than a finding's not at all."""
    found: list[tuple[str, int]] = []
    start = 0
    for raw in text.split("\n"):
        at, start = start, start + len(raw) + 1
        if len(raw) > _FINDING_CHARS or not (raw.startswith("[WARNING] ") or "warning: " in raw):
            continue
        if _LOCATED_PATH.search(raw) or _JAVA_PLACE.search(raw):
            found.append((" ".join(raw.split()), at))
    return found


#: the longest line read as one finding
_FINDING_CHARS = 1_000
#: maven's place of a javac finding: ``File.java:[31,9]``
_JAVA_PLACE = re.compile(r"\.\w+:\[\d+,\d+\]")


#: a build tool's closing verdict (gradle's ``BUILD FAILED in 21s``, maven's ``BUILD FAILURE``): that, not what, failed
_VERDICT = re.compile(r"\s*(?:\[\w+\]\s*)?BUILD FAIL(?:ED|URE)\b")
#: a located line that reports a pass (Unity's ``test_x.c:14: test_dry [PASSED]``)
_PASSED_LINE = re.compile(r"[\[(:]\s*(?:PASSED|PASS|OK|ok|SKIPPED|IGNORED)\s*[\])]?\s*$")
#: a section banner, or scalac 3's location banner (``-- Error: path:17:6``, ``-- [E007] Type Mismatch Error: ...``)
_BANNER = re.compile(r"_{4,}|={4,}|-{6,}|^(?:\[error\] )?-- (?:\[E\d+\] )?(?:\w+ )*Error: \S+:\d+")


def _wrapper_exception_line(line: str) -> bool:
    """Whether a line states a wrapper's own exception (``-> BuildFailedException: Target 'Test' failed.``)."""
    return any(f"{name}:" in line for name in WRAPPER_EXCEPTIONS)


def _clip(line: str) -> str:
    """A line of at most HEADLINE_CHARS, its head and its tail (a message's point is often at its end: ``Task ...
    got Future ... attached to a different loop``)."""
    if len(line) <= HEADLINE_CHARS + TAIL_CHARS:
        return line
    return f"{line[:HEADLINE_CHARS]} … {line[-TAIL_CHARS:]}"


#: a line of a stack trace (it names a file the error passed through, not one it is in)
_FRAME = re.compile(
    r"^\s*(?:at\s|#\d+\s|File \"|from\s|\d+:\s*0x|Error Trace:)|:\d+: in \w|\(package:|"
    # scalac 3's excerpt of the code under its banner: a numbered line, a caret, an empty gutter
    r"^\[error\]\s+(?:\d+\s+\|.*|\|[\s^~]*)$"
)
#: a file:line (or file(line,col)) reference
_LOCATED_PATH = re.compile(PATH.pattern.replace("(?::\\d+)?", "(?=:\\d+|\\(\\d+)"))


def unformatted(program: str, output: str) -> Signature:
    """The signature of a formatter's check that failed by naming files (``Diff in lua/a.lua``, ``would reformat
    b.gd``): the files it named, and a headline that says so."""
    text = clean(output)
    paths = list(dict.fromkeys(m.group(1) for m in PATH.finditer(text)))[:MAX_IDENTIFIERS]
    lines = tuple(" ".join(line.split())[:HEADLINE_CHARS] for line in text.splitlines() if PATH.search(line))
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
        elif not pending and STATES_ERROR.search(raw):
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
        if len(line) < 8 or line in found or _TALLY.match(line) or WRAPPER_FAILED.match(line):
            continue
        if not _FAILURE_WORDS.search(_ZERO.sub("", line)):
            continue
        found.append(line)
        if len(found) == ERROR_LINES:
            break
    return tuple(found)


#: a line that starts with the file it is about and says something of it (``lib/A.pm: Loop iterator is not lexical at
#: line 11``); one that reports the file clean (``lib/B.pm source OK``) says nothing
_FILE_FINDING = re.compile(PATH.pattern + r":?\s+\S.{3,}")
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
