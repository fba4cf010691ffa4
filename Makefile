# One command each on a fresh machine: `make demo`, `make test`.
# Each creates or refreshes .venv (when pyproject.toml changes) before it runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/privacy-ci demo

test: setup
	$(BIN)/python -m pytest

bench: setup
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
