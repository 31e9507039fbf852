# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both bootstrap a local virtualenv (.venv) first, so they work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock native/pyproject.toml native/ckptlog_native.pyi $(wildcard native/src/*.rs)

.PHONY: demo test venv bench clean

$(BIN)/ckptlog: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[test,s3]"
	touch $(BIN)/ckptlog

# The compiled fold engine (optional: without cargo, `ckptlog fold` uses the Python fold).
$(VENV)/.native: $(BIN)/ckptlog $(NATIVE_SOURCES)
	@if command -v cargo >/dev/null 2>&1; then \
		echo "building the native fold engine (native/, Rust)"; \
		$(BIN)/python -m pip install -q --disable-pip-version-check ./native || exit 1; \
	else \
		echo "note: no cargo on PATH, so no native fold engine; ckptlog fold uses the Python fold"; \
	fi
	touch $@

venv: $(BIN)/ckptlog $(VENV)/.native

demo: venv
	$(BIN)/ckptlog demo

test: venv
	$(BIN)/ckptlog broker fetch
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python -m bench.fold

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis native/target
