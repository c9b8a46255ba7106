"""Which checks a shell command runs, as capture reads it (pure).

The outcome inference's list (:mod:`ctxbus.core.check_commands`) decides, for every segment of a command line
(``ruff check && mypy`` runs two checks); capture adds the checks of infrastructure and release work that list does
not hold: ``terraform``/``tofu`` ``validate`` and ``plan`` and ``fmt -check``, policy scanners (``checkov``,
``tflint``, ``tfsec``, ``hadolint``, ``kube-linter``, ``actionlint``, ``shellcheck``), ``helm lint``,
``cargo publish --dry-run``/``cargo package``, Django's ``manage.py migrate|makemigrations --check|check``,
``alembic upgrade``, ``prisma validate``. A failure of one of them is fixed like a test's.

Any other command is a check by its own repetition (:func:`repeated_key`): a command of a stack neither list knows
(``xcodebuild test``, ``php artisan test``, a project's ``./scripts/check``) that fails, is edited for, and then
passes when run again is fixed like a test, keyed by its program and subcommand. Commands that only look, move
files, fetch or talk to git's remotes are never checks that way.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from functools import lru_cache

from ctxbus.core.check_commands import (
    BUILD,
    LINT,
    TEST,
    TYPECHECK,
    Check,
    check_of_command,
    check_of_segment,
    gradle_task_kinds,
)

#: a command line's pieces: a quoted string (whole), an escaped character, an operator, or a run of anything else
_PIECES = re.compile(r"""'[^']*'?|"(?:\\.|[^"\\])*"?|\\.|&&|\|\||[;|\n]|[^'"\\&|;\n]+|[&\\]""", re.S)
_OPERATOR_PIECES = frozenset({"&&", "||", ";", "|", "\n"})


def forget_commands() -> None:
    """Drop the command lines kept while a session was read (they may hold what redaction would remove)."""
    _split_commands.cache_clear()
    _segment_words.cache_clear()


def split_commands(command: str) -> list[str]:
    """The commands of a command line, split at ``&&``, ``||``, ``;``, ``|`` and newlines outside quotes
    (``grep -E '^(error|warn)'`` is one command), each stripped; empty ones dropped."""
    return list(_split_commands(command or ""))


@lru_cache(maxsize=1024)
def _split_commands(command: str) -> tuple[str, ...]:
    # a line is read by several rules (its checks, its repeated keys, what it changed): split once
    parts: list[str] = []
    current: list[str] = []
    for piece in _PIECES.findall(command):
        if piece in _OPERATOR_PIECES:
            parts.append("".join(current))
            current = []
        else:
            current.append(piece)
    parts.append("".join(current))
    return tuple(p.strip() for p in parts if p.strip())


_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {
    "sudo",
    "env",
    "time",
    "nice",
    "command",
    "exec",
    "npx",
    "pnpm",
    "bunx",
    "uv",
    "poetry",
    "pipenv",
    "bundle",
    "bin/rails",
}
_RUN_WORDS = {"run", "exec", "dlx"}
_SCANNERS = {
    "checkov": LINT,
    "tflint": LINT,
    "tfsec": LINT,
    "hadolint": LINT,
    "kube-linter": LINT,
    "actionlint": LINT,
    "shellcheck": LINT,
    "yamllint": LINT,
    "kubeconform": LINT,
}
MAX_CHARS = 4_000
#: programs whose failure and later success say nothing about a fix: they look, move, fetch, or manage processes
_NOT_CHECKS = frozenset(
    """
    cat ls ll head tail less more grep egrep rg ag ack find fd cd pwd echo printf which type whereis file stat
    wc du df tree git gh glab curl wget http ssh scp rsync rm mkdir rmdir cp mv ln touch chmod chown sed awk
    sort uniq cut tr diff open xdg-open kill pkill killall ps top htop sleep true false test [ export source .
    set unset alias history man jq yq tar unzip zip gzip xargs tee lsof netstat ss ping dig nslookup date
    whoami id uname clear exit read code vim vi nano emacs say osascript pbcopy pbpaste brew apt apt-get
    docker-compose kubectl aws gcloud az heroku fly vercel psql mysql sqlite3 redis-cli mongosh python python3
    node ruby php perl bash sh zsh
    """.split()  # noqa: SIM905 (a word list reads better than 130 quoted strings)
)
#: program -> the subcommands that make it a check by repetition (an interpreter runs a script or a tool's CLI)
RUNNERS = frozenset({"python", "python3", "node", "ruby", "php", "perl", "bash", "sh", "zsh"})
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9:_.-]*$")


def _words(segment: str) -> list[str]:
    return list(_segment_words(segment))


@lru_cache(maxsize=1024)
def _segment_words(segment: str) -> tuple[str, ...]:
    try:
        words = shlex.split(segment) if len(segment) <= MAX_CHARS else segment.split()
    except ValueError:
        words = segment.split()
    i = 0
    while i < len(words) and (_ENV.match(words[i]) or words[i] in _WRAPPERS or words[i] in _RUN_WORDS):
        i += 1
    return tuple(words[i:])


def extra_check(segment: str) -> Check | None:
    """A check capture knows beyond the outcome inference's list, or None."""
    words = _words(segment)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    sub = words[1] if len(words) > 1 else ""
    if head in {"terraform", "tofu", "terragrunt"}:
        if sub in {"validate", "plan"}:
            return Check(f"{head} {sub}", BUILD)
        if sub == "fmt" and any(w.startswith("-check") for w in words):
            return Check(f"{head} fmt", LINT)
        return None
    if head in _SCANNERS:
        return Check(head, _SCANNERS[head])
    if head == "helm" and sub in {"lint", "template"}:
        return Check(f"helm {sub}", LINT)
    if head == "cargo" and (sub == "package" or (sub == "publish" and "--dry-run" in words)):
        return Check(f"cargo {sub}", BUILD, "cargo")
    if head.startswith("python") or head in {"manage.py", "django-admin"}:
        rest = words[2:] if len(words) > 1 and words[1].endswith("manage.py") else words[1:]
        if rest and rest[0] in {"migrate", "check"}:
            return Check(f"django {rest[0]}", BUILD)
        if rest and rest[0] == "makemigrations" and "--check" in rest:
            return Check("django makemigrations", LINT)
        return None
    if head == "dbt" and sub in {"test", "run", "build", "compile", "seed", "snapshot"}:
        return Check(f"dbt {sub}", TEST if sub == "test" else BUILD)
    if head == "airflow" and sub in {"dags", "tasks"} and "test" in words:
        return Check(f"airflow {sub} test", TEST)
    if head == "sqlfluff" and sub == "lint":
        return Check("sqlfluff", LINT)
    if head == "mix" and sub in {"credo", "dialyzer", "format", "ecto.migrate"}:
        if sub == "format" and "--check-formatted" not in words:
            return None
        kinds = {"credo": LINT, "dialyzer": TYPECHECK, "format": LINT, "ecto.migrate": BUILD}
        return Check(f"mix {sub}", kinds[sub], "mix")
    if head in {"rails", "rake"} and sub in {"test", "spec", "db:migrate"}:
        return Check(f"rails {sub}", BUILD if sub == "db:migrate" else TEST)
    if head in {"clang-tidy", "cppcheck", "cpplint", "ktlint", "detekt", "swiftlint", "standardrb", "erb_lint"}:
        return Check(head, LINT)
    if head == "cmake" and ("-S" in words or "-B" in words) and "--build" not in words:
        return Check("cmake configure", BUILD)
    if head == "alembic" and sub == "upgrade":
        return Check("alembic upgrade", BUILD)
    if head == "prisma" and sub in {"validate", "migrate"}:
        return Check(f"prisma {sub}", BUILD)
    return None


#: a command that rewrites files in place: a formatter (not in its check mode), a linter's ``--fix``, code generation
_REWRITE = re.compile(
    r"(?:--fix\b|--write\b|(?<![-=])\bfmt\b|(?<![-=])\bformat\b|\bscalafmt(?:All)?\b|\bscalafixAll\b|\bblack\b|\bisort\b|"
    r"\bgofmt\s+-w\b|\brubocop\s+-[aA]\b|\bswiftformat\b|\bphp-cs-fixer\s+fix\b|\bclang-format\s+-i\b|"
    r"\bktlint\s+(?:-F|--format)\b|\bbuild_runner\s+build\b|\b(?:prisma|sqlc|go)\s+generate\b|\bgo\s+mod\s+tidy\b|"
    r"\blint:fix\b|\bpint\b|\bspotless(?:Apply|:apply)\b|\bktlintFormat\b|"
    # code and schema generators: a project script or tool named so (``npm run db:codegen``, ``graphql-codegen``,
    # ``buf generate``, ``drizzle-kit generate``)
    r"\b(?:[\w-]+:)?(?:[\w-]+-)?codegen\b(?!:)|\b(?:buf|drizzle-kit)\s+generate\b|"
    # any formatter by its name (gdformat, shfmt, ocamlformat, elm-format, erlfmt, dune fmt) and a few others
    r"(?<![\w=-])(?:[A-Za-z][\w-]*)?(?:fmt|format)\b|\bstylua\b|\bnimpretty\b|\bperltidy\b|\b(?:ormolu|fourmolu)\b|"
    # a build script's format target (FAKE, Cake, Nuke: ``./build.sh -t Format``, ``FormatAll``; not ``CheckFormat``)
    r"(?<![\w=-])Format\w*\b)"
)
#: the check modes of those tools: they only look
_CHECK_MODE = re.compile(
    r"(?:--check\b|-check\b|--verify-no-changes\b|--dry-run\b|--set-exit-if-changed\b|--test\b|--lint\b|"
    r"\bformat-patch\b|--diff\b|-l\b|--list-different\b|--validate\b|(?<=\s)-d\b|\bformat\s+lint\b)"
)


def formatter_check(command: str) -> bool:
    """Whether a command line runs a formatter in its check mode (``stylua --check``, ``shfmt -d``): it fails by
    naming files, often with no error line at all."""
    return program_of(command) != "git" and any(
        _REWRITE.search(seg) and _CHECK_MODE.search(seg) for seg in split_commands(command)
    )


#: a step that rewrites and then checks in one invocation (``sbt scalafmt scalafmtCheckAll``, ``ruff check --fix``)
_ALSO_CHECKS = re.compile(r"(?i)check")


def rewrites_files(command: str) -> bool:
    """Whether a command line rewrites files in place (``ruff format``, ``eslint --fix``, ``sbt scalafmtAll``,
    ``dart run build_runner build``), rather than checking them (``--check``, ``--verify-no-changes``)."""
    if not command or program_of(command) == "git":
        return False
    return bool(_REWRITE.search(command)) and not _CHECK_MODE.search(command)


def only_rewrites(command: str) -> bool:
    """Whether every step of a command line that does something rewrites files (``sbt scalafmtAll``): it fixes, it
    verifies nothing (``terraform fmt && terraform plan`` also verifies)."""
    doing = [
        seg
        for seg in split_commands(command)
        if _segment_key(seg) is not None or check_of_segment(seg) is not None or extra_check(seg) is not None
    ]
    return bool(doing) and all(rewrites_files(seg) and not _ALSO_CHECKS.search(seg) for seg in doing)


def _programs(command: str) -> Iterator[str]:
    """The programs a command line runs, in order (wrappers and ``VAR=value`` left out), by their basenames."""
    for segment in split_commands(command):
        words = _words(segment)
        if words and words[0] not in {"cd", "pushd"}:
            yield words[0].rsplit("/", 1)[-1]


def program_of(command: str) -> str:
    """The program a command line runs first."""
    return next(_programs(command), "")


def programs_of(command: str) -> set[str]:
    """Every program a command line runs."""
    return set(_programs(command))


#: git subcommands that change the working tree (``git checkout main -- .prettierignore`` restores a file)
_GIT_CHANGES = re.compile(r"^git\s+(?:checkout|restore|apply|am|stash\s+(?:pop|apply)|cherry-pick|revert|reset)\b")


def changes_files(command: str) -> bool:
    """Whether a command line may change the project (more than looking): a program no list knows as only looking,
    moving or fetching (``cargo sqlx prepare``, ``npm install``), or git restoring files."""
    return bool(repeated_keys(command)) or any(
        _GIT_CHANGES.match(" ".join(seg.split())) for seg in split_commands(command)
    )


def segments_of(command: str) -> set[str]:
    """The commands of a command line, each with its spaces normalised (``git checkout x && npm run lint``: two)."""
    return {" ".join(seg.split()) for seg in split_commands(command)}


def repeated_key(command: str) -> str | None:
    """What identifies a command no check list knows, as a check by repetition: its program (basename) and up to
    two subcommand words (``xcodebuild test``, ``php artisan test``); None for commands that only look, move files,
    fetch, or run an interpreter on nothing named. The first such segment of a command line decides."""
    keys = repeated_keys(command)
    return keys[0] if keys else None


def repeated_keys(command: str) -> list[str]:
    """The keys (:func:`repeated_key`) of every segment of a command line, in order
    (``npm install && npx cdk synth``: ``npm install``, ``cdk synth``)."""
    keys: list[str] = []
    for key in map(_segment_key, split_commands(command)):
        if key is not None and key not in keys:
            keys.append(key)
    return keys


def _segment_key(segment: str) -> str | None:
    words = _words(segment)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if head in RUNNERS:
        # ``php artisan test``, ``python manage.py check``, ``bash scripts/ci.sh``: the script is the check
        rest = words[1:]
        if any(w in {"-c", "-e", "--eval", "-r", "-i"} for w in rest):
            return None  # code given inline: no script to name
        script = rest[rest.index("-m") + 1] if "-m" in rest[:-1] else next((w for w in rest if w[:1] != "-"), "")
        if not script:
            return None
        after = rest[rest.index(script) + 1 :]
        sub = after[0] if after and _SUBCOMMAND.match(after[0]) else None
        return " ".join(w for w in (head, script.rsplit("/", 1)[-1], sub) if w)[:120]
    if head in _NOT_CHECKS:
        return None
    subs: list[str] = []
    for word in words[1:]:
        if len(subs) == 2 or not _SUBCOMMAND.match(word):
            break
        subs.append(word)
    return " ".join([head, *subs])[:120]


#: a pipeline whose last stage filters or pages (its exit code is the filter's, not the check's), unless pipefail
_FILTER_TAIL = re.compile(
    r"\|\s*(?:tail|head|grep|egrep|rg|less|more|tee|sed|awk|cut|sort|uniq|xcpretty|xcbeautify|cat)\b"
)
#: a compiler's or checker's error line: ``file(9,19): error CS8618: ...``, ``file:3:1 - error TS2345: ...``,
#: ``file:3:1: error: ...`` (a tally such as ``0 Error(s)`` is none)
_ERROR_LINE = re.compile(
    r"^(?!.*\b0 errors?\b)(?:.*?\S\s+(?:-\s+)?)?(?:error|ERROR|fatal error)(?:\s+[A-Z]{1,6}\d{2,6})?\s*:\s*\S.*$", re.M
)


#: what a check's own output says when it failed, in the words test runners, builds and linters of many stacks share:
#: a tally of failures (``Some tests failed``, ``Failed: Total 3, Failed 1``, ``2 errors``, ``failed=1``), a log level
#: at a line's start (``[error]``, ``fatal:``), a failed-test marker (``[E]``, ``FAILED!``). Read only when the exit
#: code is a filter's, so a word in a passing run's log cannot fail it on its own.
_SAYS_FAILED = re.compile(
    r"(?i:\b(?:some|all|\d+) tests? failed\b|\btests? failed\b|"
    r"\b[1-9]\d* (?:failed|failures?|failing|errors?|problems?)\b|"
    r"\b(?:failed|failures|errors)(?::|=|\s)\s*[1-9]\d*\b(?!\s*(?:passed|ok|skipped)))|"
    r"^\s*(?:\[(?:error|ERROR|FAIL|FAILED)\]|ERROR:|FAIL(?:ED)?\b|fatal:|CRITICAL\b)|\bFAILED!|\[E\]\s*$|"
    r"\b[1-9]\d* issues? found\b",
    re.M,
)


def piped_failure(output: str) -> str | None:
    """The line of a filtered output that says its check failed (:data:`_SAYS_FAILED`), or None."""
    for line in (output or "").splitlines():
        if len(line) <= 500 and _SAYS_FAILED.search(line):
            return " ".join(line.split())[:200]
    return None


def fails_through_filter(command: str, output: str) -> bool:
    """Whether a command line whose exit code is a filter's (:func:`piped_into_filter`) failed, by its output."""
    return piped_into_filter(command) and piped_failure(output) is not None


def piped_into_filter(command: str) -> bool:
    """Whether a command line's exit code is a filter's (``... | tail -20``), so its output must say how it went."""
    return "pipefail" not in command and bool(_FILTER_TAIL.search(command or ""))


def error_lines(output: str) -> list[str]:
    """The error lines of a compiler's or checker's output (``error CS8618: ...``, ``error: ...``)."""
    return [" ".join(m.group(0).split())[:200] for m in _ERROR_LINE.finditer(output or "")][:3]


def check_key(check: Check) -> str:
    """What tells two checks apart: the family and the kind (``gradle`` runs tests, lint and builds)."""
    return f"{check.family}:{check.kind}"


def checks_in(command: str) -> list[Check]:
    """Every check a command line runs, in order (each family once)."""
    found: dict[str, Check] = {}
    for segment in split_commands(command):
        check = check_of_segment(segment) or extra_check(segment)
        if check is not None:
            found.setdefault(check_key(check), check)
        # one gradle line runs several tasks: each task's kind is a check of its own (``./gradlew detekt test``)
        for kind in gradle_task_kinds(_words(segment)):
            found.setdefault(f"gradle:{kind}", Check("gradle", kind, "gradle"))
    return list(found.values())


def main_check(command: str) -> Check | None:
    """The check a command line is judged as: the outcome inference's, else the first capture knows."""
    check = check_of_command(command)
    if check is not None:
        return check
    extra = checks_in(command)
    return extra[0] if extra else None
