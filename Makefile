# ctxbus developer entry points. `make setup` installs everything into .venv;
# `make test` runs the whole suite (it runs setup first when needed).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The newest supported Python (pyproject's requires-python), when the machine has it: the suite runs on it
# too (`make test NEWEST_PY=` skips it). pyenv's shims only answer for the global version, so its
# interpreters are looked up by path first.
NEWEST_PY ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) \
	$(shell command -v python3.13 2>/dev/null) $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) \
	$(shell command -v python3.12 2>/dev/null))
NEWEST_VENV := .venv-newest
NEWEST_STAMP := $(NEWEST_VENV)/.installed

.PHONY: setup chromium test test-newest lint up bench docs clean

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

test: $(STAMP) chromium lint
	$(BIN)/pytest -n 2 --dist loadgroup
	@if [ -n "$(NEWEST_PY)" ]; then $(MAKE) --no-print-directory test-newest; \
	else echo "no newer Python found: the suite ran on $$($(BIN)/python --version) only"; fi

$(NEWEST_STAMP): pyproject.toml
	$(NEWEST_PY) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/pip install --quiet --upgrade pip
	$(NEWEST_VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(NEWEST_STAMP)

# the suite again on the newest supported Python (its own venv; bytecode of that version)
test-newest: $(NEWEST_STAMP) chromium
	@echo "the suite on $$($(NEWEST_VENV)/bin/python --version)"
	$(NEWEST_VENV)/bin/pytest -n 2 --dist loadgroup -p no:cacheprovider

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
