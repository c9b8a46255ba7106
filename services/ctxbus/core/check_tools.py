"""The kinds of check (tests, type checks, builds, linters), a check's identity (``Check``), and the tools and
subcommands known to be checks, by kind (pure data; :mod:`ctxbus.core.check_commands` reads command lines with
them)."""

from __future__ import annotations

from dataclasses import dataclass

TEST = "test"
BUILD = "build"
TYPECHECK = "typecheck"
LINT = "lint"
#: kinds in the order a command's main check is chosen (a command running a build and tests is a test run)
KIND_ORDER = (TEST, TYPECHECK, BUILD, LINT)


@dataclass(frozen=True, slots=True)
class Check:
    family: str
    kind: str
    #: the toolchain whose test runs compile the code first (``cargo test`` builds what ``cargo build`` builds)
    toolchain: str | None = None


#: first word -> (family, kind); the family is the tool
TOOLS: dict[str, tuple[str, str]] = {
    "pytest": ("pytest", TEST),
    "py.test": ("pytest", TEST),
    "tox": ("tox", TEST),
    "nox": ("nox", TEST),
    "jest": ("jest", TEST),
    "vitest": ("vitest", TEST),
    "mocha": ("mocha", TEST),
    "ava": ("ava", TEST),
    "karma": ("karma", TEST),
    "rspec": ("rspec", TEST),
    "phpunit": ("phpunit", TEST),
    "pest": ("pest", TEST),
    "ctest": ("ctest", TEST),
    "busted": ("busted", TEST),
    "mypy": ("mypy", TYPECHECK),
    "pyright": ("pyright", TYPECHECK),
    "tsc": ("tsc", TYPECHECK),
    "vue-tsc": ("tsc", TYPECHECK),
    "svelte-check": ("svelte-check", TYPECHECK),
    "flow": ("flow", TYPECHECK),
    "flake8": ("flake8", LINT),
    "pylint": ("pylint", LINT),
    "eslint": ("eslint", LINT),
    "stylelint": ("stylelint", LINT),
    "golangci-lint": ("golangci-lint", LINT),
    "rubocop": ("rubocop", LINT),
    "shellcheck": ("shellcheck", LINT),
    "ktlint": ("ktlint", LINT),
    "hadolint": ("hadolint", LINT),
    "hlint": ("hlint", LINT),
    "swiftlint": ("swiftlint", LINT),
    "phpstan": ("phpstan", TYPECHECK),
    "psalm": ("psalm", TYPECHECK),
    "javac": ("javac", BUILD),
    "prove": ("prove", TEST),
    "gcc": ("cc", BUILD),
    "g++": ("cc", BUILD),
    "clang": ("cc", BUILD),
    "clang++": ("cc", BUILD),
    "ninja": ("ninja", BUILD),
    "clang-tidy": ("clang-tidy", LINT),
    "brakeman": ("brakeman", LINT),
    "webpack": ("webpack", BUILD),
    "rollup": ("rollup", BUILD),
    "esbuild": ("esbuild", BUILD),
}
#: (tool, sub-command) -> (family, kind)
SUBCOMMANDS: dict[tuple[str, str], tuple[str, str]] = {
    ("go", "test"): ("go test", TEST),
    ("go", "build"): ("go build", BUILD),
    ("go", "vet"): ("go vet", LINT),
    ("cargo", "test"): ("cargo test", TEST),
    ("cargo", "nextest"): ("cargo test", TEST),
    ("cargo", "build"): ("cargo build", BUILD),
    ("cargo", "check"): ("cargo build", BUILD),
    ("cargo", "clippy"): ("cargo clippy", LINT),
    ("dotnet", "test"): ("dotnet test", TEST),
    ("meson", "test"): ("meson test", TEST),
    ("bazel", "test"): ("bazel test", TEST),
    ("bazel", "build"): ("bazel build", BUILD),
    ("meson", "compile"): ("meson compile", BUILD),
    ("dotnet", "build"): ("dotnet build", BUILD),
    ("swift", "test"): ("swift test", TEST),
    ("swift", "build"): ("swift build", BUILD),
    ("deno", "test"): ("deno test", TEST),
    ("deno", "check"): ("deno check", TYPECHECK),
    ("deno", "lint"): ("deno lint", LINT),
    ("mix", "test"): ("mix test", TEST),
    ("mix", "compile"): ("mix compile", BUILD),
    ("mix", "credo"): ("mix credo", LINT),
    ("mix", "dialyzer"): ("mix dialyzer", TYPECHECK),
    ("rake", "test"): ("rake test", TEST),
    ("rails", "test"): ("rails test", TEST),
    ("rails", "test:system"): ("rails test", TEST),
    ("rails", "test:all"): ("rails test", TEST),
    ("rake", "spec"): ("rspec", TEST),
    ("stack", "test"): ("stack test", TEST),
    ("stack", "build"): ("stack build", BUILD),
    ("cabal", "test"): ("cabal test", TEST),
    ("cabal", "build"): ("cabal build", BUILD),
    ("dune", "test"): ("dune test", TEST),
    ("dune", "build"): ("dune build", BUILD),
    ("zig", "build"): ("zig build", BUILD),
    ("flutter", "test"): ("flutter test", TEST),
    ("dart", "test"): ("dart test", TEST),
    ("dart", "analyze"): ("dart analyze", LINT),
    ("flutter", "analyze"): ("dart analyze", LINT),
    ("hatch", "test"): ("hatch test", TEST),
    ("playwright", "test"): ("playwright", TEST),
    ("cypress", "run"): ("cypress", TEST),
    ("ruff", "check"): ("ruff", LINT),
    ("biome", "check"): ("biome", LINT),
    ("biome", "lint"): ("biome", LINT),
    ("vite", "build"): ("vite build", BUILD),
    ("next", "build"): ("next build", BUILD),
    ("docker", "build"): ("docker build", BUILD),
    ("cmake", "--build"): ("cmake", BUILD),
    ("python", "unittest"): ("unittest", TEST),
    ("python", "pytest"): ("pytest", TEST),
    ("python", "mypy"): ("mypy", TYPECHECK),
    ("python", "pyright"): ("pyright", TYPECHECK),
    ("python", "ruff"): ("ruff", LINT),
    ("python", "flake8"): ("flake8", LINT),
    ("python", "pylint"): ("pylint", LINT),
    ("python", "tox"): ("tox", TEST),
    ("python", "compileall"): ("compileall", BUILD),
    ("pre-commit", "run"): ("pre-commit", LINT),
    ("swift-format", "lint"): ("swift-format", LINT),
}
#: formatters count only when they check (``--check``), never when they rewrite files
CHECK_ONLY = {"black": "black", "isort": "isort", "prettier": "prettier", "gofmt": "gofmt"}
MAVEN_GOALS = {
    "test": TEST,
    "verify": TEST,
    "integration-test": TEST,
    "compile": BUILD,
    "package": BUILD,
    "install": BUILD,
}
#: gradle task name prefixes (``assembleDebug``, ``testDebugUnitTest``, ``compileReleaseKotlin``); first match wins
GRADLE_TASKS = (
    ("connected", TEST),
    ("test", TEST),
    ("check", TEST),
    ("build", BUILD),
    ("assemble", BUILD),
    ("bundle", BUILD),
    ("compile", BUILD),
    ("lint", LINT),
    ("ktlint", LINT),
    ("detekt", LINT),
)
#: tools whose test command compiles the code first: a passing test run shows the build passes too
COMPILING_TOOLCHAINS = {
    *("cargo", "go", "dotnet", "swift", "mix", "stack", "cabal", "dune", "zig", "maven", "gradle", "bazel"),
}
