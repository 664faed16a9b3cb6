# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv and install torch first (CPU build here; GPU users: make TORCH_SPEC=torch
# ...), then the package: `demo` with its plotting extra only, `test` with the test extras.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
PYTEST_ARGS ?=
# `make test` runs pytest in PYTEST_WORKERS pytest-xdist processes (2: CI's two cores), each test
# module whole in one worker (--dist loadscope: module fixtures are built once);
# PYTEST_WORKERS=0 runs the suite serially in one process.
PYTEST_WORKERS ?= 2

.PHONY: demo test setup lint imports typecheck wheel-check portable-check bench bench-tests reliability-report gpu-check clean

# The demo needs only the package and matplotlib (its plots); the test toolchain (mypy, ruff,
# ray, triton, notebooks, ...) is installed on top of that by `make test` / `make setup`.
# pip prints each package it collects and downloads (with a progress bar on a terminal): torch
# alone is a minute or two. make PIP_FLAGS=-q quiets it.
PIP_FLAGS ?=
$(RUN_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== [1/3] pip itself"
	$(PY) -m pip install -q --upgrade pip
	@echo "== [2/3] $(TORCH_SPEC) (the largest download)"
	$(PY) -m pip install $(PIP_FLAGS) "$(TORCH_SPEC)"
	@echo "== [3/3] spector-gpu and matplotlib (the demo's plots)"
	$(PY) -m pip install $(PIP_FLAGS) -e ".[plot]"
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	@echo "== the test extras (ruff, mypy, pytest, the adapters' libraries, ray, ...)"
	$(PY) -m pip install $(PIP_FLAGS) -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(RUN_STAMP)
	$(VENV)/bin/spector-gpu demo --out demo_out

typecheck: $(STAMP)
	$(PY) -m mypy

LINT_PATHS := spector_gpu kernels tests benchmarks examples tools
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# Install what users install: sdist -> wheel -> a clean venv, then the README example, the CLI
# and the quick demo from there (tools/wheel_check.sh, ~1-2 min).
wheel-check: $(STAMP)
	PYTHON=$(PYTHON) BUILD_PY=$(PY) TORCH_SPEC="$(TORCH_SPEC)" bash tools/wheel_check.sh

# the kernels' portable build (no AVX2 clones), as a host without AVX2 runs them, tested
portable-check: $(STAMP)
	BUILD_PY=$(PY) bash tools/portable_check.sh

# the layer table of docs/architecture.md, as import-linter contracts in pyproject.toml
imports: $(STAMP)
	$(VENV)/bin/lint-imports

test: $(STAMP) lint imports
	$(PY) -m mypy
	$(MAKE) --no-print-directory wheel-check
	$(MAKE) --no-print-directory portable-check
	$(PY) -m pytest -m "not heavy" -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

bench-tests: $(STAMP)
	$(PY) -m pytest -m heavy $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_store.py
	$(PY) benchmarks/bench_recall.py

reliability-report: $(STAMP)
	$(PY) benchmarks/reliability_report.py

gpu-check:
	bash benchmarks/gpu_check.sh

clean:
	rm -rf $(VENV) demo_out runs .pytest_cache .mypy_cache
