# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both bootstrap a local virtualenv (.venv) first, so they work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-long lint venv compiled frameworks emulators bench bench-report clean

# uv installs from its cache (~/.cache/uv, or $UV_CACHE_DIR) by hardlinks: a fresh .venv takes seconds
# once the wheels were fetched, torch's ~5 GB of CUDA libraries included (CI caches them this way).
UV := $(BIN)/uv
INSTALL := $(UV) pip install -q --python $(BIN)/python

$(BIN)/ckptlog: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "uv>=0.5"
	$(INSTALL) -e ".[test,s3,ray]"
	$(MAKE) compiled
	touch $(BIN)/ckptlog

venv: $(BIN)/ckptlog

# The compiled fold (setup.py, docs/design.md "The compiled fold (mypyc)"): the fold's modules built with mypyc
# beside their sources, against this venv's packages (the types `mypy --strict` checks: no build isolation);
# ~1 min. Again after changing a compiled module (the tests refuse a stale build); CKPTLOG_PURE=1: none.
compiled:
	rm -f ckptlog/_compiled.json *__mypyc*.so $$(find ckptlog -name '*.so') build/compiled-fold.txt
	$(INSTALL) "setuptools>=77" wheel  # without isolation: the build backend from the venv (77: PEP 639 license)
	$(INSTALL) --no-build-isolation --no-deps --reinstall-package ckptlog -e .
	@tail -n 1 build/compiled-fold.txt

# The trainers the integration tests run for real (Lightning, transformers, torch, Keras, JAX/Orbax):
# only `make test` needs them, not `make demo`.
$(VENV)/.frameworks: pyproject.toml $(BIN)/ckptlog
	$(INSTALL) -e ".[test,s3,ray,frameworks]"
	$(MAKE) compiled  # that install could not compile (build isolation: no mypyc), so it removed the build
	touch $(VENV)/.frameworks

frameworks: $(VENV)/.frameworks

demo: venv
	$(BIN)/ckptlog demo

# The storage emulators the contract suite runs against (tests/emulators.py): Azurite from npm,
# fake-gcs-server from the Go module proxy, pinned, installed once into ${CKPTLOG_CACHE:-~/.cache/ckptlog}.
emulators: venv
	$(BIN)/python -m tests.emulators

# The linters first (seconds), then the tests on $(WORKERS) parallel workers sharing one broker
# (tests/shared_broker.py), the long modules left to test-long (tests/conftest.py LONG_MODULES).
# CI runs both; test-long serially (the Ray and SASL modules time out when they share 2 cores).
WORKERS ?= 3
test: lint emulators frameworks
	$(BIN)/ckptlog broker fetch
	$(BIN)/python -m pytest -n $(WORKERS) -m "not long"

test-long: emulators frameworks
	$(BIN)/ckptlog broker fetch
	$(BIN)/python -m pytest -m long

# mypy reads the trainers' own types (the integrations subclass their callbacks): lint needs them installed
lint: frameworks
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict

bench: venv
	$(INSTALL) -e ".[bench]"
	$(BIN)/python -m bench.fold

# The whole benchmarks report (tables and plots in docs/benchmarks.md); `ARGS=--quick` for a smoke run.
bench-report: venv
	$(INSTALL) -e ".[bench]"
	$(BIN)/python -m bench.report $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build ckptlog/_compiled.json
	find . -path ./$(VENV) -prune -o -name '*.so' -print | xargs rm -f
