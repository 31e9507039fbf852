# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both bootstrap a local virtualenv (.venv) first, so they work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint venv emulators bench bench-report clean

$(BIN)/ckptlog: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[test,s3,ray]"
	touch $(BIN)/ckptlog

venv: $(BIN)/ckptlog

demo: venv
	$(BIN)/ckptlog demo

# The storage emulators the contract suite runs against (tests/emulators.py): Azurite from npm,
# fake-gcs-server from the Go module proxy, pinned, installed once into ${CKPTLOG_CACHE:-~/.cache/ckptlog}.
emulators: venv
	$(BIN)/python -m tests.emulators

# The linters first (seconds), then the tests: CI runs exactly this.
test: lint emulators
	$(BIN)/ckptlog broker fetch
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict

bench: venv
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[bench]"
	$(BIN)/python -m bench.fold

# The whole benchmarks report (tables and plots in docs/benchmarks.md); `ARGS=--quick` for a smoke run.
bench-report: venv
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[bench]"
	$(BIN)/python -m bench.report $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
