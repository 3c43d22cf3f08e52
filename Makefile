# Two entry points (see README): `make run` and `make test`.
# Both create or reuse .venv and install what they need; no internet needed beyond the
# package registries. torch is pinned to the CPU build first so that the `torch>=2.2`
# range in pyproject.toml never pulls the multi-GB CUDA release.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.edgefl-installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "$(TORCH)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,ray]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/edgefl run scenarios/quickstart.toml --out results/quickstart

# lint, format and types first (seconds), then the suite
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py --quick

clean:
	rm -rf $(VENV) results
