# ctxbus developer entry points. `make setup` installs everything into .venv;
# `make test` runs the whole suite (it runs setup first when needed).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup chromium test lint up bench clean

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

up: $(STAMP)
	$(BIN)/ctxbus up

bench: $(STAMP)
	$(BIN)/ctxbus bench

clean:
	rm -rf $(VENV) build *.egg-info
