"""Which shell commands are checks (tests, builds, type checks, linters), and which check they are (pure).

A Bash command line is split into its simple commands (at ``&&``, ``||``, ``;``, ``|`` and new
lines); each is stripped of what only wraps a tool (``cd x``, ``FOO=1``, ``timeout 60``, ``uv run``,
``npx``, ``python -m`` ...) and its first words are looked up here. The *family* names "the same
check run again" (``pytest`` now and ``pytest -x tests/a.py`` later are one family), so a failure
fixed by a later pass of the same family can be told from two different checks.

Installing, formatting in place, running an app or a script, reading files and searching are
not checks: their output says nothing about whether the work succeeded.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from ctxbus.core.check_tools import (
    BUILD,
    CHECK_ONLY,
    COMPILING_TOOLCHAINS,
    GRADLE_TASKS,
    KIND_ORDER,
    LINT,
    MAVEN_GOALS,
    SUBCOMMANDS,
    TEST,
    TOOLS,
    TYPECHECK,
    Check,
)

__all__ = [
    "AGGREGATE_SCRIPTS",
    "BUILD",
    "KIND_ORDER",
    "LINT",
    "TEST",
    "TYPECHECK",
    "Check",
    "check_of_command",
    "check_of_segment",
    "gradle_task_kinds",
    "is_aggregate",
    "same_tool",
]

_SPLIT = re.compile(r"\|\||&&|[;|\n]")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: words that only run the next words (dropped, with their own options)
_WRAPPERS = {"sudo", "env", "time", "nice", "command", "exec", "xvfb-run", "dotenv", "stdbuf", "caffeinate"}
#: two-word launchers: ``uv run pytest`` is pytest
_LAUNCHERS = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("rye", "run"),
    ("bundle", "exec"),
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("yarn", "dlx"),
    ("npm", "exec"),
    ("conda", "run"),
}
_RUNNERS = {"npx", "bunx", "pnpx"}
_PYTHONS = re.compile(r"^(python[0-9.]*|py)$")

#: task runners whose recipe's name says what it runs, as a package script's does (``deno task test``, ``just
#: lint``, go-task's ``task test``, ``composer run check``, a magefile's ``mage lint``)
_TASK_RUNNERS = {"just", "task", "composer", "mage"}
_SCRIPT_WORDS = (
    (re.compile(r"test|spec|e2e"), TEST),
    (re.compile(r"typecheck|type-check|check-types|types|tsc"), TYPECHECK),
    (re.compile(r"lint|eslint|format:check|fmt:check|prettier|check-?format|format-?check"), LINT),
    (re.compile(r"build|compile"), BUILD),
    (re.compile(r"^check$|^verify$|^ci$"), TEST),
)
_MAKE_NOT_CHECKS = re.compile(r"^(clean|install|setup|deps|run|dev|serve|start|up|down|help|fmt|format|docs?)$")


#: a longer segment is split on blanks: ``shlex`` builds each word a character at a time, copying it every time
#: (quadratic on one long word; a 100,000-character one took seconds)
SHLEX_MAX_CHARS = 4_000


def _words(segment: str) -> list[str]:
    try:
        words = shlex.split(segment, comments=False) if len(segment) <= SHLEX_MAX_CHARS else segment.split()
    except ValueError:
        words = segment.split()
    return [w for w in words if w not in {"(", ")", "{", "}"}]


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


#: at most this many words after a launcher are tried as the start of the launched command
_LAUNCHED_WITHIN = 6


def _strip_wrappers(words: list[str]) -> list[str]:
    """``words`` without what only launches the command they run (env, timeout, uv run, npx, python -m ...).

    Walks an index over ``words`` (slicing the list at every wrapper made a command of many wrappers quadratic).
    """
    i = 0
    while i < len(words):
        head = _base(words[i])
        if _ENV_ASSIGNMENT.match(words[i]) or head in _WRAPPERS:
            i += 1
        elif head == "timeout":  # timeout [options] DURATION command
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            i += 1
        elif head in _RUNNERS or (len(words) - i > 1 and (head, words[i + 1]) in _LAUNCHERS):
            # the launcher's own options may take values: the launched command starts at the first word that is a check
            rest = words[i + 1 :] if head in _RUNNERS else words[i + 2 :]
            for start in range(min(len(rest), _LAUNCHED_WITHIN)):
                if not rest[start].startswith("-") and _check_of_words(rest[start:]) is not None:
                    return rest[start:]
            return rest
        elif _PYTHONS.match(head) and len(words) - i > 2 and words[i + 1] == "-m":
            return ["python", words[i + 2], *words[i + 3 :]]
        elif head in {"bash", "sh", "zsh"} and len(words) - i > 2 and words[i + 1] in {"-c", "-lc", "-ec"}:
            return ["__shell__", words[i + 2]]
        else:
            return words[i:]
    return []


def _script_check(script: str) -> tuple[str, str] | None:
    name = script.lower()
    for pattern, kind in _SCRIPT_WORDS:
        if pattern.search(name):
            return name, kind
    return None


def _package_manager(words: list[str]) -> Check | None:
    pm, rest = words[0], [w for w in words[1:] if not w.startswith("-")]
    if not rest:
        return None
    verb = rest[0]
    if verb in {"test", "t"} and pm in {"npm", "yarn", "pnpm"}:
        return Check(f"{pm} test", TEST)
    if pm == "bun" and verb == "test":
        return Check("bun test", TEST)
    script = rest[1] if verb in {"run", "run-script"} and len(rest) > 1 else verb if pm in {"yarn", "pnpm"} else None
    if script is None:
        return None
    found = _script_check(script)
    if found is None:
        return None
    return Check(f"{pm} test" if found[0] == "test" else f"{pm} run {found[0]}", found[1])


#: a shell redirection as a word of its own (``2>&1``, ``>``, ``>>log``, ``<in``)
_REDIRECT = re.compile(r"^\d*(?:[<>]|&>)")


def _targets(words: Sequence[str]) -> list[str]:
    """A build tool's targets or tasks: its words but options, assignments and redirections (``make test 2>&1``,
    ``./gradlew test > build.log``), lower-cased."""
    return [w.lower() for w in words[1:] if not w.startswith("-") and "=" not in w and not _REDIRECT.match(w)]


def _gradle_kind(task: str) -> str | None:
    """The kind of a gradle task that checks (a format check ``spotlessKotlinCheck``, not ``spotlessApply``)."""
    if task.startswith("spotless"):
        return LINT if task.endswith("check") else None  # (names are lower-cased)
    return next((kind for prefix, kind in GRADLE_TASKS if task.startswith(prefix)), None)


def gradle_task_kinds(words: Sequence[str]) -> list[str]:
    """The kinds of the check tasks one gradle invocation runs, in order, each once (``./gradlew ktlintCheck test``:
    lint, test); nothing for another program."""
    if not words or words[0].rsplit("/", 1)[-1] not in {"gradle", "gradlew"}:
        return []
    tasks = [t.rsplit(":", 1)[-1] for t in _targets(words)]
    kinds = [kind for kind in map(_gradle_kind, tasks) if kind is not None]
    return list(dict.fromkeys(kinds))


def _build_tool(words: list[str]) -> Check | None:
    tool = words[0].rsplit("/", 1)[-1]
    targets = _targets(words)
    if tool in {"mvn", "mvnw"}:
        kinds = [MAVEN_GOALS[t] for t in targets if t in MAVEN_GOALS]
        return Check("maven", TEST if TEST in kinds else BUILD, "maven") if kinds else None
    if tool in {"gradle", "gradlew"}:
        tasks = [t.rsplit(":", 1)[-1] for t in targets]
        task_kinds = [kind for kind in map(_gradle_kind, tasks) if kind is not None]
        return Check("gradle", min(task_kinds, key=KIND_ORDER.index), "gradle") if task_kinds else None
    if tool in {"make", "gmake"}:
        if not targets:
            return Check("make", BUILD)
        if any(_MAKE_NOT_CHECKS.match(t) for t in targets):
            return None
        target = _script_check(targets[-1]) or (("all", BUILD) if targets[-1] == "all" else None)
        return Check(f"make {target[0]}", target[1]) if target else None
    return None


#: .NET build scripts run a named target (FAKE, Cake, Nuke): ``./build.sh -t Check``, ``dotnet fake build -t Test``,
#: ``dotnet cake --target=Lint``, nuke's ``./build.sh Compile``
_BUILD_SCRIPTS = frozenset({"build.sh", "build.cmd", "build.ps1"})
_BUILD_TOOLS = frozenset({"fake", "cake", "nuke"})
_TARGET_FLAGS = frozenset({"-t", "--target", "-target", "-Target", "--Target"})


def _build_script(head: str, words: list[str]) -> tuple[str, list[str]] | None:
    """The build script or tool a command runs and its arguments (None: not one)."""
    if head in _BUILD_SCRIPTS:
        return head, words[1:]
    if head == "dotnet" and len(words) > 1 and words[1] in _BUILD_TOOLS:
        runner, args = words[1], words[2:]
    elif head in _BUILD_TOOLS:
        runner, args = head, words[1:]
    else:
        return None
    return runner, args[1:] if runner == "fake" and args[:1] == ["build"] else args


def _build_target(args: list[str]) -> str | None:
    """The target a build script's arguments name: after ``-t``/``--target`` (or ``--target=X``), else the first
    word that is no option (nuke's ``./build.sh Test``)."""
    for i, word in enumerate(args):
        flag, eq, value = word.partition("=")
        if eq and flag in _TARGET_FLAGS:
            return value
        if word in _TARGET_FLAGS:
            return args[i + 1] if i + 1 < len(args) else None
    return next((w for w in args if not w.startswith("-")), None)


def _named_task(runner: str, name: str | None) -> Check | None:
    found = _script_check(name) if name else None
    return Check(f"{runner} {found[0]}", found[1]) if found else None


def _runner(head: str, words: list[str]) -> Check | None:
    """A task runner's recipe or ``php artisan test`` (None: neither)."""
    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if head == "deno" and rest[:1] == ["task"]:
        return _named_task("deno task", rest[1] if len(rest) > 1 else None)
    if head in _TASK_RUNNERS:
        if head == "composer" and rest[:1] in (["run"], ["run-script"]):
            rest = rest[1:]
        return _named_task(head, rest[0] if rest else None)
    if head == "php" and rest[:2] == ["artisan", "test"]:
        return Check("artisan test", TEST)
    return None


def _check_of_words(words: list[str]) -> Check | None:
    if not words:
        return None
    head = _base(words[0])
    words = [head, *words[1:]]
    if head in {"npm", "yarn", "pnpm", "bun"}:
        return _package_manager(words)
    if (found := _runner(head, words)) is not None:
        return found
    if (script := _build_script(head, words)) is not None:
        return _named_task(script[0], _build_target(script[1]))
    if head in {"mvn", "mvnw", "gradle", "gradlew", "make", "gmake"}:
        return _build_tool(words)
    if head in CHECK_ONLY:
        return Check(CHECK_ONLY[head], LINT) if any(w in {"--check", "-c", "--diff", "-l"} for w in words) else None
    if head == "cargo" and len(words) > 1 and words[1] == "fmt":
        return Check("cargo fmt", LINT) if "--check" in words else None
    if head == "ruff" and len(words) > 1 and words[1] == "format":
        return Check("ruff format", LINT) if "--check" in words else None
    if _PYTHONS.match(head) and len(words) > 2 and _base(words[1]) == "manage.py" and words[2] == "test":
        return Check("django test", TEST)
    if head == "swift" and words[1:3] == ["format", "lint"]:  # the toolchain's own swift-format, checking
        return Check("swift-format", LINT)
    if len(words) > 1 and (head, words[1]) in SUBCOMMANDS:
        family, kind = SUBCOMMANDS[(head, words[1])]
        return Check(family, kind, head if head in COMPILING_TOOLCHAINS else None)
    if head in TOOLS:
        family, kind = TOOLS[head]
        return Check(family, kind)
    if head == "mix" and len(words) > 1:  # a project's own alias (``mix check``, ``mix ci``)
        return _named_task("mix", words[1])
    return None


def check_of_segment(segment: str) -> Check | None:
    """The check one simple command runs, or None."""
    words = _strip_wrappers(_words(segment.strip()))
    if words[:1] == ["__shell__"]:
        return check_of_command(words[1])
    return _check_of_words(words)


#: a project's whole-check script (``make check``, ``npm run ci``, ``deno task check``): it runs the project's other
#: checks, so its pass supersedes an earlier failure of one of them run through the same tool, and its failure may be
#: a build's or a linter's
AGGREGATE_SCRIPTS = frozenset({"check", "ci", "verify", "all"})


def is_aggregate(family: str) -> bool:
    """Whether a check family is a project's whole-check script run through a tool (``make check``)."""
    tool, _, script = family.rpartition(" ")
    return bool(tool) and script in AGGREGATE_SCRIPTS


def same_tool(family: str, other: str) -> bool:
    """Whether two check families run through the same program (``deno test`` and ``deno task check``)."""
    return family.split(" ", 1)[0] == other.split(" ", 1)[0]


def check_of_command(command: str) -> Check | None:
    """The main check a Bash command line runs: of all its checks, the first of the strongest kind
    (tests, then type checks, then builds, then linters); None when it runs no check."""
    checks = [c for c in (check_of_segment(s) for s in _SPLIT.split(command or "")) if c is not None]
    if not checks:
        return None
    return min(checks, key=lambda c: KIND_ORDER.index(c.kind))
