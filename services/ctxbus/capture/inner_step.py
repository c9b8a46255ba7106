"""Which step of a wrapper failed (pure): ``make lint`` ran ``mix format --check-formatted`` and then
``mix credo --strict``, and the findings are credo's.

A wrapper (make, just, a package or composer script, ``deno task``) echoes each command before it runs it: make
and just print the command line, npm and pnpm ``> eslint .``, yarn ``$ eslint .``, composer ``> phpstan analyse``,
deno ``Task lint deno lint``, a shell under ``set -x`` ``+ ruff check .``. The step that failed is the last echoed
check before the wrapper's own failure line (``make: *** [Makefile:9: lint] Error 2``, ``npm ERR!``); its command
names the tool, which the wrapper's name does not. A learning says it ("`make lint` failed in `mix credo
--strict` with ..."), so a later search for the tool finds it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ctxbus.capture.checks import checks_in, programs_of
from ctxbus.capture.error_patterns import WRAPPER_FAILED
from ctxbus.core.check_commands import Check, check_of_command

#: how a wrapper echoes the command it runs: a prefix (npm's ``> ``, yarn's ``$ ``, ``set -x``'s ``+ ``, deno's
#: ``Task <name> ``) or none (make, just)
_ECHO = re.compile(r"^(?:> |\$ |\+ |Task \S+ )?(?P<command>\S.{0,238})$")
#: echoed lines are short; output longer than this is read from its start up to here
READ_CHARS = 100_000
#: programs that run a project's scripts and echo each command they run (whose passing output is read for them)
SCRIPT_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun", "make", "gmake", "just", "composer", "deno", "task", "mage"})
#: the runners that echo a bare command line (the others mark theirs: ``_MARKS``)
BARE_ECHO = frozenset({"make", "gmake", "just", "mage"})
_MARKS = ("> ", "$ ", "+ ", "Task ")
#: echoed commands kept of one run (a Makefile may echo one line per file)
MAX_ECHOED = 20


def _echoed_check(line: str, wrapper: str) -> str | None:
    # an echo starts its line (indented output is the steps' own) and names a program: a small letter or a path
    # first (``Checking 41 files``, ``[error] ...``, ``12:7 error`` are output, and are not parsed as commands)
    match = _ECHO.match(line.rstrip())
    if match is None:
        return None
    command = match.group("command").strip()
    if command == wrapper or not (command[0].islower() or command.startswith(("./", "../", "/"))):
        return None
    return command if checks_in(command) else None


def _is_itself(echoed: str, main: Check | None, wrapper: str) -> bool:
    """Whether an echoed command is the wrapper's own check run by the same program (no step of its own)."""
    return check_of_command(echoed) == main and echoed.split(maxsplit=1)[0] == wrapper.split(maxsplit=1)[0]


@lru_cache(maxsize=64)  # a fixed error's lesson and the test of how it passed read the same output
def inner_step(command: str, output: str) -> str | None:
    """The echoed check command inside a failing wrapper ``command`` whose findings ``output`` holds, or None
    (``command`` is no wrapper, echoes nothing, or its only step is itself)."""
    wrapper = " ".join(command.split())
    main = check_of_command(command)
    if main is None or not output:
        return None
    found: str | None = None
    for line in output[:READ_CHARS].splitlines():
        if WRAPPER_FAILED.match(line):
            break
        echoed = _echoed_check(line, wrapper) if len(line) < 240 else None
        if echoed is not None:
            found = echoed
    if found is None or _is_itself(found, main, wrapper):
        return None
    return found


def echoed_checks(command: str, output: str) -> tuple[str, ...]:
    """The check commands (at most MAX_ECHOED) a script runner's (passing) ``output`` echoes (``npm test`` ->
    ``vitest run``): what the run also ran, so its pass is a run of those tools too. Empty for a command that runs
    no script runner. Only make and its kin echo a bare command line; the others mark theirs (``> ``, ``$ ``)."""
    runners = programs_of(command) & SCRIPT_RUNNERS
    if not output or not runners:
        return ()
    bare = bool(runners & BARE_ECHO)
    wrapper = " ".join(command.split())
    main = check_of_command(command)
    found: dict[str, None] = {}
    for line in output[:READ_CHARS].splitlines():
        if len(line) >= 240 or not (bare or line.startswith(_MARKS)):
            continue
        echoed = _echoed_check(line, wrapper)
        if echoed is not None and not _is_itself(echoed, main, wrapper):
            found.setdefault(echoed)
            if len(found) == MAX_ECHOED:
                break
    return tuple(found)
