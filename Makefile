# ctxbus developer entry points. `make setup` installs everything into .venv;
# `make test` runs lint and the suite except the `slow` tests, on the .venv's Python (it runs setup first when
# needed); `make test-fast` the unit tests alone; `make test-slow` the `slow` tests; `make test-newest` the suite
# (as `make test` selects it) on the newest supported Python. CI (.ci/run) runs all of them: docs/development.md.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The newest supported Python (pyproject's requires-python), when the machine has it: the suite runs on it
# too in CI (`make test-newest`; `.ci/run` skips it when NEWEST_PY is empty). pyenv's shims only answer for the global version, so its
# interpreters are looked up by path first.
NEWEST_PY ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) \
	$(shell command -v python3.13 2>/dev/null) $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) \
	$(shell command -v python3.12 2>/dev/null))
NEWEST_VENV := .venv-newest
NEWEST_STAMP := $(NEWEST_VENV)/.installed

.PHONY: setup chromium test test-fast test-slow test-newest lint coverage up bench docs clean

# pytest's exit code 5 ("no tests collected/selected") is not a failure of a target that selects by marker
PYTEST_OK5 = rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests selected (exit 5), not a failure"; rc=0; fi; exit $$rc

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# bytecode ahead of time: hooks are a fresh process per call (and PYTHONDONTWRITEBYTECODE may be set)
	$(BIN)/python -m compileall -q services
	touch $(STAMP)

setup: $(STAMP) chromium

# the dashboard's browser tests drive Debian's chromium through Playwright (which never downloads a
# browser here); installed once, only where it is missing and apt-get exists
chromium:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check services tests
	$(BIN)/ruff format --check services tests
	$(BIN)/mypy

# the suite on the .venv's Python, without the `slow` tests (pyproject's addopts deselect them: -m "not slow")
test: $(STAMP) chromium lint
	@$(BIN)/pytest -n 2 --dist loadgroup; $(PYTEST_OK5)

# the unit tests alone (no broker, no browser): the quick loop
test-fast: $(STAMP)
	@$(BIN)/pytest -n 2 --dist loadgroup tests/unit; $(PYTEST_OK5)

# the soak-like tests (scale-out, chaos, footprint, broker recycle, soak benches): CI runs them after `make test`
test-slow: $(STAMP) chromium
	@$(BIN)/pytest -n 2 --dist loadgroup -m slow; $(PYTEST_OK5)

# line and branch coverage (pytest-cov; [tool.coverage.*] in pyproject): the tests in COV_TESTS (default: the suite
# as `make test` selects it; `make coverage COV_TESTS=tests/unit` for the quick loop), every module's figures, then
# the package's and core/'s totals (docs/development.md records them; core/ at least 90%). Not part of `make test`:
# it slows every test. The totals print even when a test fails; the target's status is the tests'.
COV_TESTS ?= tests
coverage: $(STAMP) chromium
	@rm -f .coverage .coverage.*
	@$(BIN)/pytest -n 2 --dist loadgroup -p no:cacheprovider --cov --cov-branch --cov-report=term $(COV_TESTS); \
		rc=$$?; $(BIN)/coverage json -q -o .coverage-report.json && $(BIN)/python .ci/coverage_summary.py .coverage-report.json; \
		if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

$(NEWEST_STAMP): pyproject.toml
	@if [ -z "$(NEWEST_PY)" ]; then echo "no newer Python found (NEWEST_PY is empty)"; exit 1; fi
	$(NEWEST_PY) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/pip install --quiet --upgrade pip
	$(NEWEST_VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(NEWEST_STAMP)

# the suite (as `make test` selects it) again on the newest supported Python (its own venv; bytecode of that
# version)
test-newest: $(NEWEST_STAMP) chromium
	@echo "the suite on $$($(NEWEST_VENV)/bin/python --version)"
	@$(NEWEST_VENV)/bin/pytest -n 2 --dist loadgroup -p no:cacheprovider; $(PYTEST_OK5)

up: $(STAMP)
	$(BIN)/ctxbus up

bench: $(STAMP)
	$(BIN)/ctxbus bench

# the documentation site (docs/, mkdocs.yml) into site/; --strict: a broken link or a page missing from the
# nav fails the build (tests/unit/test_docs_build.py builds it the same way)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

clean:
	rm -rf $(VENV) $(NEWEST_VENV) build *.egg-info site
