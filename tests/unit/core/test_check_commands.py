"""Which shell commands are checks, and which family and kind each is."""

from __future__ import annotations

import pytest

from ctxbus.core.check_commands import Check, check_of_command

CHECKS = [
    ("pytest -q 2>&1 | tail -20", "pytest", "test"),
    ("cd web && npm test", "npm test", "test"),
    ("npm run test", "npm test", "test"),
    ("npm run test:unit -- --watch=false", "npm run test:unit", "test"),
    ("uv run --with hypothesis pytest tests/", "pytest", "test"),
    ("python -m pytest -x tests/test_auth.py", "pytest", "test"),
    ("python3 -m unittest discover", "unittest", "test"),
    ("python manage.py test accounts", "django test", "test"),
    (".venv/bin/pytest", "pytest", "test"),
    ("/usr/bin/env FOO=1 pytest", "pytest", "test"),
    ("timeout 300 go test ./...", "go test", "test"),
    ("cargo test --all-features", "cargo test", "test"),
    ("cargo build --release", "cargo build", "build"),
    ("cargo clippy -- -D warnings", "cargo clippy", "lint"),
    ("cargo fmt -- --check", "cargo fmt", "lint"),
    ("npx tsc --noEmit", "tsc", "typecheck"),
    ("yarn build", "yarn run build", "build"),
    ("pnpm lint", "pnpm run lint", "lint"),
    ("bun test", "bun test", "test"),
    ("npx -y prettier --check .", "prettier", "lint"),
    ("make", "make", "build"),
    ("make test", "make test", "test"),
    ("make test 2>&1 | tail -12", "make test", "test"),
    ("./gradlew test > build.log 2>&1", "gradle", "test"),
    ("make -C backend lint", "make lint", "lint"),
    ("mvn -q clean install", "maven", "build"),
    ("mvn test -Dtest=AuthTest", "maven", "test"),
    ("./gradlew :app:test", "gradle", "test"),
    ("./gradlew assembleDebug", "gradle", "build"),
    ("./gradlew testDebugUnitTest lintDebug", "gradle", "test"),
    ("dotnet test", "dotnet test", "test"),
    ("ruff check . && mypy src", "mypy", "typecheck"),
    ("npm run build && npm test", "npm test", "test"),
    ("bash -c 'pytest -q'", "pytest", "test"),
    ("pre-commit run --all-files", "pre-commit", "lint"),
    ("npx playwright test", "playwright", "test"),
    ("go vet ./...", "go vet", "lint"),
    ("docker build -t acme .", "docker build", "build"),
    # task runners: the recipe's name says what it runs, as a package script's does
    ("deno task test", "deno task test", "test"),
    ("deno task check 2>&1 | tail -30", "deno task check", "test"),
    ("just test", "just test", "test"),
    ("just lint", "just lint", "lint"),
    ("task test", "task test", "test"),
    ("composer test", "composer test", "test"),
    ("composer run-script check", "composer check", "test"),
    ("composer run lint", "composer lint", "lint"),
    ("mix check", "mix check", "test"),
    # checkers (formatters in their check mode are capture's: ctxbus.capture.checks.formatter_check)
    ("mix credo --strict", "mix credo", "lint"),
    ("mix dialyzer", "mix dialyzer", "typecheck"),
    ("php artisan test --filter=PermitSearchTest", "artisan test", "test"),
    ("./vendor/bin/phpstan analyse --memory-limit=1G", "phpstan", "typecheck"),
    ("dart analyze --fatal-infos", "dart analyze", "lint"),
    ("flutter analyze", "dart analyze", "lint"),
    ("hlint src app", "hlint", "lint"),
    # swift's linters and a go magefile's targets, gradle's format checks
    ("swift format lint --strict --recursive Sources Tests", "swift-format", "lint"),
    ("swift-format lint -r Sources", "swift-format", "lint"),
    ("swiftlint --strict", "swiftlint", "lint"),
    ("mage lint", "mage lint", "lint"),
    ("mage test", "mage test", "test"),
    ("./gradlew spotlessKotlinCheck", "gradle", "lint"),
    ("./gradlew spotlessCheck test", "gradle", "test"),
    # .NET build scripts by their target (FAKE, Cake, Nuke): ``-t Check``, ``--target=Test``, nuke's first word
    ("./build.sh -t Check", "build.sh check", "test"),
    ("./build.sh -t CheckFormat", "build.sh checkformat", "lint"),
    ("dotnet fake build -t Test", "fake test", "test"),
    ("dotnet cake --target=Lint", "cake lint", "lint"),
    ("./build.sh Compile", "build.sh compile", "build"),
    ("./build.cmd --target Test", "build.cmd test", "test"),
    # meson's own test runner and build, clang-tidy
    ("meson test -C build --setup=valgrind station", "meson test", "test"),
    ("meson compile -C build", "meson compile", "build"),
    ("clang-tidy -p build src/station.c", "clang-tidy", "lint"),
    # perl's test harness
    ("prove -lr t/", "prove", "test"),
    # rails' own test runner, brakeman
    ("bin/rails test test/models/booking_test.rb", "rails test", "test"),
    ("bin/rails test:system", "rails test", "test"),
    ("bundle exec rails test", "rails test", "test"),
    ("bin/brakeman --no-pager -q", "brakeman", "lint"),
    # bazel
    ("bazel build //services/rentcalc/...", "bazel build", "build"),
    ("bazel test //... --test_output=errors", "bazel test", "test"),
]
NOT_CHECKS = [
    "git status",
    "git commit -m 'run pytest; fix the tests'",
    "grep -rn FAILED logs/",
    "cat test-results.txt",
    "echo pytest",
    "pip install pytest",
    "npm install",
    "yarn install",
    "npm run dev",
    "make clean",
    "mvn clean",
    "prettier --write .",
    "ruff format .",
    "cargo fmt",
    "go run .",
    "python scripts/migrate.py",
    "docker compose up -d",
    "ls tests/",
    "deno task dev",
    "just run",
    "task --list",
    "composer install",
    "composer require laravel/sanctum",
    "mix format",
    "mix deps.get",
    "php artisan migrate",
    "dart format lib",
    "deno fmt",
    "fourmolu -i src",
    "sbt run",
    "sbt console",
    "stylua lua/",
    "dotnet format",
    "swift format -i -r Sources",
    "./gradlew spotlessApply",
    "mage dev",
    "./build.sh -t Format",
    "meson setup build",
    "./build.sh --target Clean",
    "bazel run //:gazelle",
    "bin/rails db:migrate",
    "bin/rails generate model Booking",
    "bazel mod tidy",
    "",
]


@pytest.mark.parametrize(("command", "family", "kind"), CHECKS)
def test_checks(command: str, family: str, kind: str) -> None:
    check = check_of_command(command)
    assert check is not None and (check.family, check.kind) == (family, kind)


def test_toolchains_whose_tests_compile() -> None:
    assert check_of_command("cargo build") == Check("cargo build", "build", "cargo")
    assert check_of_command("cargo test") == Check("cargo test", "test", "cargo")
    assert check_of_command("go vet ./...") == Check("go vet", "lint", "go")
    assert check_of_command("npm test") == Check("npm test", "test", None)
    assert check_of_command("bazel test //...") == Check("bazel test", "test", "bazel")


@pytest.mark.parametrize("command", NOT_CHECKS)
def test_not_checks(command: str) -> None:
    assert check_of_command(command) is None


def test_unbalanced_quotes_do_not_break_it() -> None:
    assert check_of_command('pytest -k "unterminated') == Check("pytest", "test")
