# ctxbus developer entry points. `make setup` installs everything into .venv;
# `make test` runs the whole suite (it runs setup first when needed).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test lint up bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# bytecode ahead of time: hooks are a fresh process per call (and PYTHONDONTWRITEBYTECODE may be set)
	$(BIN)/python -m compileall -q services
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check services tests
	$(BIN)/ruff format --check services tests
	$(BIN)/mypy

test: $(STAMP) lint
	$(BIN)/pytest -n 2 --dist loadgroup

up: $(STAMP)
	$(BIN)/ctxbus up

bench: $(STAMP)
	$(BIN)/ctxbus bench

clean:
	rm -rf $(VENV) build *.egg-info
