# Two entry points (see README): `make run` and `make test`.
# Both create or reuse .venv and install what they need; no internet needed beyond the
# package registries. torch is pinned to the CPU build first so that the `torch>=2.2`
# range in pyproject.toml never pulls the multi-GB CUDA release.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.edgefl-installed

.PHONY: run test test-e2e bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,ray]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/edgefl run scenarios/quickstart.toml --out results/quickstart

# lint, format and types first (seconds; mypy without its .mypy_cache, as on a fresh clone: about 24 s of CPU), then
# the suite on every core (at most TEST_WORKERS processes; each test file runs whole on one of them, so its module
# fixtures are built once). One process: make test TEST_WORKERS=0
TEST_WORKERS ?= 4
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n auto --maxprocesses $(TEST_WORKERS) --dist loadfile)

# CI's second stage: the cases of whole processes (kill -9 at every step of a writer and the reruns, Ctrl-C, sweep
# workers, a folder locked across processes, the notebooks' kernels, the benchmark scripts' smoke runs, a local Ray
# cluster; marker e2e in pyproject.toml), left out of `make test` to keep it under 5 minutes on 2 cores. .ci/run
# runs both.
test-e2e: $(STAMP)
	$(BIN)/python -m pytest -m e2e $(if $(filter 0,$(TEST_WORKERS)),,-n auto --maxprocesses $(TEST_WORKERS) --dist load)

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py --quick

clean:
	rm -rf $(VENV) results
