"""Which checks a shell command runs, as capture reads it (pure).

The outcome inference's list (:mod:`ctxbus.core.check_commands`) decides, for every segment of a command line
(``ruff check && mypy`` runs two checks); capture adds the checks of infrastructure and release work that list does
not hold: ``terraform``/``tofu`` ``validate`` and ``plan`` and ``fmt -check``, policy scanners (``checkov``,
``tflint``, ``tfsec``, ``hadolint``, ``kube-linter``, ``actionlint``, ``shellcheck``), ``helm lint``,
``cargo publish --dry-run``/``cargo package``, Django's ``manage.py migrate|makemigrations --check|check``,
``alembic upgrade``, ``prisma validate``. A failure of one of them is fixed like a test's.
"""

from __future__ import annotations

import re
import shlex

from ctxbus.core.check_commands import BUILD, LINT, TEST, TYPECHECK, Check, check_of_command, check_of_segment

_SPLIT = re.compile(r"\|\||&&|[;|\n]")
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


def _words(segment: str) -> list[str]:
    try:
        words = shlex.split(segment) if len(segment) <= MAX_CHARS else segment.split()
    except ValueError:
        words = segment.split()
    i = 0
    while i < len(words) and (_ENV.match(words[i]) or words[i] in _WRAPPERS or words[i] in _RUN_WORDS):
        i += 1
    return words[i:]


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


def check_key(check: Check) -> str:
    """What tells two checks apart: the family and the kind (``gradle`` runs tests, lint and builds)."""
    return f"{check.family}:{check.kind}"


def checks_in(command: str) -> list[Check]:
    """Every check a command line runs, in order (each family once)."""
    found: dict[str, Check] = {}
    for segment in _SPLIT.split(command or ""):
        if not segment.strip():
            continue
        check = check_of_segment(segment) or extra_check(segment)
        if check is not None:
            found.setdefault(check_key(check), check)
    return list(found.values())


def main_check(command: str) -> Check | None:
    """The check a command line is judged as: the outcome inference's, else the first capture knows."""
    check = check_of_command(command)
    if check is not None:
        return check
    extra = checks_in(command)
    return extra[0] if extra else None
