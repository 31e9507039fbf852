# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both bootstrap a local virtualenv (.venv) first, so they work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint venv bench clean

$(BIN)/ckptlog: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[test,s3,ray]"
	touch $(BIN)/ckptlog

venv: $(BIN)/ckptlog

demo: venv
	$(BIN)/ckptlog demo

# The linters first (seconds), then the tests: CI runs exactly this.
test: lint
	$(BIN)/ckptlog broker fetch
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict

bench: venv
	$(BIN)/python -m bench.fold

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
